package gl_test

import (
	"encoding/json"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
)

func TestSum(t *testing.T) {
	t.Parallel()

	t.Run("sums beyond int64 are exact and come back within it", func(t *testing.T) {
		t.Parallel()
		maxInt := gl.SumOf(math.MaxInt64)
		over := maxInt.Add(maxInt).Add(gl.SumOf(3))
		require.Equal(t, "18446744073709551617", over.String())
		_, fits := over.Int64()
		require.False(t, fits)
		back, fits := over.Sub(maxInt).Sub(maxInt).Int64()
		require.True(t, fits)
		require.Equal(t, int64(3), back)
		require.Equal(t, 1, over.Cmp(maxInt))
		require.Equal(t, gl.SumOf(math.MinInt64), gl.Sum{}.Sub(maxInt).Sub(gl.SumOf(1)))
	})

	t.Run("equal sums are equal however they were made, zero included", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, gl.Sum{}, gl.SumOf(0))
		require.Equal(t, gl.Sum{}, gl.SumOf(5).Sub(gl.SumOf(5)))
		require.Equal(t, gl.SumOf(7), gl.SumOf(3).Add(gl.SumOf(4)))
		require.Equal(t, gl.SumOf(7), gl.NewSum(big.NewInt(7)))
		require.True(t, gl.SumOf(-2).Equal(gl.SumOf(1).Sub(gl.SumOf(3))))
	})

	t.Run("a sum made from a big.Int does not change with it", func(t *testing.T) {
		t.Parallel()
		i := big.NewInt(10)
		s := gl.NewSum(i)
		i.SetInt64(11)
		s.Big().SetInt64(12)
		require.Equal(t, "10", s.String())
	})

	t.Run("JSON shows every digit as a number", func(t *testing.T) {
		t.Parallel()
		huge, ok := new(big.Int).SetString("-92233720368547758070", 10)
		require.True(t, ok)
		out, err := json.Marshal(map[string]gl.Sum{"zero": {}, "small": gl.SumOf(150), "big": gl.NewSum(huge)})
		require.NoError(t, err)
		require.Equal(t, `{"big":-92233720368547758070,"small":150,"zero":0}`, string(out))
	})
}
