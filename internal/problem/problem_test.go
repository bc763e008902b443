package problem_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/problem"
)

func TestErrorsMatchBySlug(t *testing.T) {
	t.Parallel()
	sentinel := problem.New(problem.NotFound, "wallet-not-found", "the wallet does not exist")
	specific := problem.Newf(sentinel, "wallet %q does not exist", "alice")

	require.Equal(t, problem.NotFound, specific.Kind)
	require.Equal(t, "wallet-not-found", specific.Slug)
	require.Equal(t, `wallet "alice" does not exist`, specific.Detail)
	require.Equal(t, `wallet-not-found: wallet "alice" does not exist`, specific.Error())

	require.ErrorIs(t, specific, sentinel, "a detail does not change what the error is")
	require.ErrorIs(t, fmt.Errorf("get wallet: %w", specific), sentinel, "nor does wrapping")
	require.NotErrorIs(t, specific, problem.New(problem.NotFound, "transfer-not-found", "x"))
	require.NotErrorIs(t, errors.New("wallet-not-found"), sentinel)
}
