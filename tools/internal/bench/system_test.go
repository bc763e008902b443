package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
)

// settle has the server write out its dirty buffers (a CHECKPOINT, counted by the server) before
// a measured phase, and says when it could not.
func TestSettleCheckpointsTheServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := database.Open(ctx, envtest.DatabaseURL(t), 1)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	checkpoints := func() (n int64) {
		require.NoError(t, admin.QueryRow(ctx, "SELECT checkpoints_req FROM pg_stat_bgwriter").Scan(&n))
		return n
	}
	before := checkpoints()
	_, err = (&system{admin: admin}).settle(ctx)
	require.NoError(t, err)
	require.Greater(t, checkpoints(), before)

	_, err = admin.Exec(ctx, "SET ROLE pg_monitor")
	require.NoError(t, err)
	_, err = (&system{admin: admin}).settle(ctx)
	require.ErrorContains(t, err, "pg_checkpoint")
}
