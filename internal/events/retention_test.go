package events_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
)

// runtimeRolePool migrates a GL database as its owner and returns the owner's pool and a pool
// on it as a runtime role granted what db/roles gives the service, as serve does.
func runtimeRolePool(t *testing.T) (owner, runtime *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	owner, dbURL := envtest.MigratedPool(t, "gl")
	runtimeURL := envtest.RoleURL(t, dbURL)
	id, err := database.IdentityOf(runtimeURL)
	require.NoError(t, err)
	require.NoError(t, database.Grant(ctx, owner, "gl", id.User))
	runtime, err = database.Open(ctx, runtimeURL, 2)
	require.NoError(t, err)
	t.Cleanup(runtime.Close)
	return owner, runtime
}

// inboxRows writes n inbox rows of consumer, "<consumer>:<kind>-<i>", in status, processed ago
// (none when 0) and last seen as a duplicate dupAgo (never when 0); they arrived when they
// were processed, or ago when they were not.
func inboxRows(t *testing.T, pool *pgxpool.Pool, consumer, kind, status string, n int, ago, dupAgo time.Duration) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO inbox (id, consumer, event_id, event_type, status, reason, detail, received_at, processed_at, last_duplicate_at)
SELECT $1::text || ':' || $2::text || '-' || i, $1::text, $2::text || '-' || i, 'TransferCompleted.v2', $3::text,
       CASE WHEN $3::text = 'failed' THEN 'malformed' END, CASE WHEN $3::text = 'failed' THEN 'not an event' END,
       now() - make_interval(secs => $5::float8),
       CASE WHEN $3::text = 'processed' THEN now() - make_interval(secs => $5::float8) END,
       CASE WHEN $6::float8 > 0 THEN now() - make_interval(secs => $6::float8) END
FROM generate_series(1, $4::int) AS i`, consumer, kind, status, n, ago.Seconds(), dupAgo.Seconds())
	require.NoError(t, err)
}

// inboxKinds counts the inbox rows by consumer and kind ("gl:old").
func inboxKinds(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT consumer || ':' || split_part(event_id, '-', 1), count(*)::int FROM inbox GROUP BY 1`)
	require.NoError(t, err)
	got := map[string]int{}
	var kind string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&kind, &n}, func() error { got[kind] = n; return nil })
	require.NoError(t, err)
	return got
}

// retainingConsumer is the GL's consumer on pool with the given inbox retention.
func (b *testBundle) retainingConsumer(t *testing.T, retention time.Duration) *inbox.Consumer {
	t.Helper()
	spec, err := b.topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	c, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, Trust: b.keys.Trust, InboxRetention: retention},
		b.topo, b.nc, b.pool, inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error { return nil }), b.log)
	require.NoError(t, err)
	return c
}

const day = 24 * time.Hour

// The inbox retention, run as the service's runtime role, deletes the rows of processed events
// the inbox has not seen for its retention, more than one statement's batch of them, and keeps
// everything else: failed rows and rows in any status it does not list, rows seen within the
// retention (processed, or a duplicate lately), and another consumer's rows.
func TestInboxRetentionDeletesOnlyTheProcessedRowsPastItAsTheRuntimeRole(t *testing.T) {
	t.Parallel()
	owner, runtime := runtimeRolePool(t)
	b := setupWithNATS(t, runtime, envtest.NATSURL(t))
	inboxRows(t, owner, "gl", "old", "processed", 2500, 10*day, 0)
	inboxRows(t, owner, "gl", "failed", "failed", 3, 30*day, 0)
	inboxRows(t, owner, "gl", "processing", "processing", 2, 30*day, 0)
	inboxRows(t, owner, "gl", "recent", "processed", 4, day, 0)
	inboxRows(t, owner, "gl", "duplicated", "processed", 5, 10*day, day)
	inboxRows(t, owner, "wallet", "old", "processed", 6, 10*day, 0)

	deleted, err := b.retainingConsumer(t, inbox.DefaultRetention).DeleteExpiredInbox(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(2500), deleted)
	require.Equal(t, map[string]int{
		"gl:failed": 3, "gl:processing": 2, "gl:recent": 4, "gl:duplicated": 5, "wallet:old": 6,
	}, inboxKinds(t, owner))
}

// A row locked by another transaction (a duplicate of its event being claimed) is skipped,
// not waited for, and deleted by a later round.
func TestInboxRetentionSkipsARowAnotherTransactionHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	inboxRows(t, b.pool, "gl", "old", "processed", 3, 10*day, 0)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT 1 FROM inbox WHERE id = 'gl:old-1' FOR UPDATE")
	require.NoError(t, err)

	c := b.retainingConsumer(t, inbox.DefaultRetention)
	deleted, err := c.DeleteExpiredInbox(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), deleted)
	require.NoError(t, tx.Rollback(ctx))
	deleted, err = c.DeleteExpiredInbox(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), deleted)
}

// A stream whose max age an operator raised above the configuration (start-up keeps it) raises
// the retention with it: an event the stream may still deliver again keeps its row. A stream
// without an age limit keeps every row.
func TestInboxRetentionFollowsTheRunningStreamsMaxAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	inboxRows(t, b.pool, "gl", "tendays", "processed", 2, 10*day, 0)
	inboxRows(t, b.pool, "gl", "fortydays", "processed", 3, 40*day, 0)
	c := b.retainingConsumer(t, inbox.DefaultRetention)
	setMaxAge := func(maxAge time.Duration) {
		stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
		require.NoError(t, err)
		cfg := stream.CachedInfo().Config
		cfg.MaxAge = maxAge
		_, err = b.js.UpdateStream(ctx, cfg)
		require.NoError(t, err)
	}

	setMaxAge(0) // no age limit
	_, err := c.DeleteExpiredInbox(ctx)
	require.ErrorContains(t, err, "no max age")
	require.Equal(t, map[string]int{"gl:tendays": 2, "gl:fortydays": 3}, inboxKinds(t, b.pool))

	setMaxAge(30 * day)
	deleted, err := c.DeleteExpiredInbox(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), deleted)
	require.Equal(t, map[string]int{"gl:tendays": 2}, inboxKinds(t, b.pool),
		"rows younger than the stream's max age and duplicate window stay, past the configured retention")
}
