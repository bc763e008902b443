package database_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/testenv"
)

func planCacheMode(t *testing.T, url string, bookkeeping bool) string {
	t.Helper()
	ctx := context.Background()
	open := database.Open
	if bookkeeping {
		open = database.OpenBookkeeping
	}
	pool, err := open(ctx, url, 1)
	require.NoError(t, err)
	defer pool.Close()
	var mode string
	require.NoError(t, pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
	return mode
}

func TestPoolsPlanEachExecutionUnlessTheURLSaysOtherwise(t *testing.T) {
	t.Parallel()
	url := testenv.DatabaseURL(t)
	require.Equal(t, "force_custom_plan", planCacheMode(t, url, false))
	require.Equal(t, "force_custom_plan", planCacheMode(t, url, true))
	own := url + "&options=-c%20plan_cache_mode%3Dauto"
	require.Equal(t, "auto", planCacheMode(t, own, false))
	require.Equal(t, "auto", planCacheMode(t, own, true))
}

func TestAfterCommitRunsOnlyOnceCommittedAndNotForSavepoints(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.MigratedPool(t, "wallet")
	ctx := context.Background()
	var ran []string
	err := database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		require.True(t, database.AfterCommit(tx, func() { ran = append(ran, "committed") }))
		sp, err := tx.Begin(ctx)
		require.NoError(t, err)
		require.False(t, database.AfterCommit(sp, func() { ran = append(ran, "savepoint") }))
		require.Empty(t, ran, "nothing runs before the commit")
		return sp.Commit(ctx)
	})
	require.NoError(t, err)
	require.Equal(t, []string{"committed"}, ran)

	err = database.WithTx(ctx, pool, func(tx pgx.Tx) error {
		database.AfterCommit(tx, func() { ran = append(ran, "rolled back") })
		return errors.New("refused")
	})
	require.Error(t, err)
	require.False(t, database.AfterCommit(pool, func() {}), "a pool has no commit to wait for")
	require.Equal(t, []string{"committed"}, ran)
}
