package bench

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl/postgres"
)

// The scale phase's loaded ledger passes every check of gl verify but the posting rules' (the
// guards' triggers are skipped while it loads, and its entries follow the load's pairs of a
// larger chart, not the rules of the events the GL consumes), and each size ends with the same tail after its latest checkpoint.
func TestTheScaleLoadIsALedgerGLVerifyAccepts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("loads a ledger into PostgreSQL")
	}
	ctx := context.Background()
	pool, _ := envtest.MigratedPool(t, "gl")
	l, err := newScaleLoader(ctx, pool, io.Discard, false)
	require.NoError(t, err)
	ledger := postgres.NewLedger(pool)
	for _, size := range []int64{50_000, 90_000} {
		s, err := l.growTo(ctx, size)
		require.NoError(t, err)
		require.Equal(t, size, s.Lines)
		var after int64
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM journal_lines WHERE posted_at > (SELECT max(through) FROM balance_checkpoints)").Scan(&after))
		require.Equal(t, int64(scaleTailLines), after, "the tail the reads add to the latest checkpoint")
		checks, err := ledger.Verify(ctx, 0)
		require.NoError(t, err)
		for _, c := range checks {
			if strings.HasPrefix(c.Name, "every entry's lines are those of the posting rule") {
				continue // the load posts a larger chart's entries by its own pairs, which no posting rule makes
			}
			require.True(t, c.Passed(), "%s: %d failures, e.g. %v", c.Name, c.Failures, c.Offenders)
			if strings.HasPrefix(c.Name, "every reversed entry") || strings.Contains(c.Name, "hold") || strings.Contains(c.Name, "adjustment") ||
				strings.Contains(c.Name, "batch entry") {
				continue // the load posts no reversals, holds, adjustments or batches: those checks have nothing to look at
			}
			require.Positive(t, c.Checked, c.Name)
		}
		reads, err := l.timeReads(ctx)
		require.NoError(t, err)
		for _, r := range ScaleReads {
			require.Equal(t, scaleReads, reads[r].Count, r)
		}
	}
	chunks := func(lines int64) int64 { return (lines + scaleCheckpointLines - 1) / scaleCheckpointLines }
	require.Equal(t, chunks(50_000-scaleTailLines)+chunks(90_000-scaleTailLines-50_000), l.checkpoints.Load(),
		"a checkpoint after each chunk of scaleCheckpointLines or less, up to each size's tail")
}
