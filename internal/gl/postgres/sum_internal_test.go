package postgres

import (
	"context"
	"math/big"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

// pgx hands a numeric over as digits times a power of ten (10000 may come as 1e4); sumFrom
// reads every whole number exactly, whatever the split, and refuses anything else.
func TestSumFromReadsEveryWholeNumericExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, envtest.ServerURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	for _, want := range []string{"0", "7", "10000", "-10000", "120000000", "9223372036854775807",
		"9223372036854775808", "-9223372036854775809", "100000000000000000000000000000000000000000"} {
		var n pgtype.Numeric
		require.NoError(t, conn.QueryRow(ctx, "SELECT $1::text::numeric", want).Scan(&n))
		got, err := sumFrom(n)
		require.NoError(t, err, want)
		require.Equal(t, want, got.String())
	}

	refused := []struct {
		name string
		n    pgtype.Numeric
	}{
		{"null", pgtype.Numeric{}},
		{"NaN", pgtype.Numeric{NaN: true, Valid: true}},
		{"infinity", pgtype.Numeric{InfinityModifier: pgtype.Infinity, Valid: true}},
		{"a fraction", pgtype.Numeric{Int: big.NewInt(12345), Exp: -2, Valid: true}},
	}
	for _, tt := range refused {
		_, err := sumFrom(tt.n)
		require.Error(t, err, tt.name)
	}
	got, err := sumFrom(pgtype.Numeric{Int: big.NewInt(12300), Exp: -2, Valid: true})
	require.NoError(t, err, "a whole number with trailing zeros after the point")
	require.Equal(t, "123", got.String())
}
