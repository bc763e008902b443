package faults_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/faults"
)

func TestAnUnarmedSetDoesNothing(t *testing.T) {
	t.Parallel()
	set, err := faults.Parse("", 1)
	require.NoError(t, err)
	require.Nil(t, set)
	require.NoError(t, set.Hit(faults.TransferAfterCommit))
	require.False(t, set.Duplicate("wallet"+faults.RelayPublishTwice))
}

func TestArmedPointsFireWithTheirProbability(t *testing.T) {
	t.Parallel()
	set, err := faults.Parse("a:error, b:duplicate@0.5, c:delay=1ms", 7)
	require.NoError(t, err)
	require.True(t, errors.Is(set.Hit("a"), faults.ErrInjected))
	require.NoError(t, set.Hit("c"))
	require.NoError(t, set.Hit("other"))
	fired := 0
	for range 1000 {
		if set.Duplicate("b") {
			fired++
		}
	}
	require.InDelta(t, 500, fired, 80)
}

func TestMalformedSpecificationsAreRefused(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"nocolon", "a:explode", "a:crash@2", "a:delay=soon"} {
		_, err := faults.Parse(spec, 1)
		require.Error(t, err, spec)
	}
}
