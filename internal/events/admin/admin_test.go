package admin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
)

// insertOutboxRow writes a row straight into status, created age ago, as the lifecycle would
// have left it.
func insertOutboxRow(t *testing.T, pool *pgxpool.Pool, status string, age time.Duration) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := pool.Exec(context.Background(), `
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, last_error,
		                    lease_owner, lease_until, acknowledged_at, dispatched_at, created_at)
		VALUES ($1, 'TransferCompleted.v1', $2, '{}', $3,
		        CASE WHEN $3 IN ('failed', 'dead_letter') THEN 10 ELSE 0 END,
		        CASE WHEN $3 IN ('failed', 'dead_letter') THEN 'broker refused' END,
		        CASE WHEN $3 = 'dispatching' THEN 'relay-1' END,
		        CASE WHEN $3 = 'dispatching' THEN now() + interval '30 seconds' END,
		        CASE WHEN $3 = 'acknowledged' THEN now() END,
		        CASE WHEN $3 IN ('dispatched', 'acknowledged') THEN now() END,
		        now() - make_interval(secs => $4))`,
		id, "transfer-"+id.String(), status, age.Seconds())
	require.NoError(t, err)
	return id
}

func outboxStatus(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) (status string, attempts int32) {
	t.Helper()
	row, err := eventsdb.New(pool).GetOutbox(context.Background(), id)
	require.NoError(t, err)
	return row.Status, row.Attempts
}

func TestAdminOutboxStatsAndTheMetricsCountEveryStatusAndDateTheOldest(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	a := admin.New(pool)
	ctx := context.Background()

	empty, err := a.OutboxStats(ctx)
	require.NoError(t, err)
	require.Len(t, empty.Counts, 6, "every status is reported, zeros included")
	require.Nil(t, empty.OldestPending)
	require.Nil(t, empty.OldestUnacknowledged)
	emptyOpen, err := a.OutboxOpen(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"pending": 0, "dispatching": 0, "dispatched": 0, "failed": 0, "dead_letter": 0}, emptyOpen.Rows)
	require.Zero(t, emptyOpen.OldestPending)
	require.Zero(t, emptyOpen.OldestUnacknowledged)

	want := map[string]int64{"pending": 2, "dispatching": 1, "dispatched": 3, "acknowledged": 4, "failed": 1, "dead_letter": 2}
	for status, n := range want {
		for range n {
			insertOutboxRow(t, pool, status, time.Minute)
		}
	}
	insertOutboxRow(t, pool, "pending", 10*time.Minute)
	insertOutboxRow(t, pool, "dispatched", time.Hour)
	insertOutboxRow(t, pool, "dead_letter", 48*time.Hour) // waits for an operator, not the relay
	want["pending"]++
	want["dispatched"]++
	want["dead_letter"]++

	stats, err := a.OutboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, want, stats.Counts)
	require.InDelta(t, (10 * time.Minute).Seconds(), stats.OldestPendingAge.Seconds(), 5)
	require.InDelta(t, time.Hour.Seconds(), stats.OldestUnacknowledgedAge.Seconds(), 5)
	require.NotNil(t, stats.OldestPending)

	// What the metrics read at every scrape: the same, but for the acknowledged rows.
	open, err := a.OutboxOpen(ctx)
	require.NoError(t, err)
	delete(want, "acknowledged")
	require.Equal(t, want, open.Rows)
	require.InDelta(t, (10 * time.Minute).Seconds(), open.OldestPending.Seconds(), 5)
	require.InDelta(t, time.Hour.Seconds(), open.OldestUnacknowledged.Seconds(), 5, "a dead letter waits for an operator, not the relay")
}

func TestAdminListsAndShowsOutboxRows(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	a := admin.New(pool)
	ctx := context.Background()
	var dead []uuid.UUID
	for range 3 {
		dead = append(dead, insertOutboxRow(t, pool, "dead_letter", time.Minute))
	}
	insertOutboxRow(t, pool, "pending", time.Minute)

	t.Run("a list holds only rows of the status, oldest first, up to the limit", func(t *testing.T) {
		rows, err := a.ListOutbox(ctx, "dead_letter", 2)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, dead[0], rows[0].ID)
		require.Equal(t, dead[1], rows[1].ID)
		require.Equal(t, "broker refused", rows[0].LastError)
	})
	t.Run("an unknown status is refused", func(t *testing.T) {
		_, err := a.ListOutbox(ctx, "lost", 10)
		require.ErrorIs(t, err, contract.ErrInvalidStatus)
	})
	t.Run("show returns one row with its payload", func(t *testing.T) {
		row, err := a.GetOutbox(ctx, dead[2])
		require.NoError(t, err)
		require.Equal(t, "dead_letter", row.Status)
		require.Equal(t, "transfer-"+dead[2].String(), row.AggregateID)
		require.JSONEq(t, `{}`, string(row.Payload))
	})
	t.Run("show of an unknown id is not found", func(t *testing.T) {
		_, err := a.GetOutbox(ctx, uuid.New())
		require.ErrorIs(t, err, contract.ErrNotFound)
	})
}

func TestAdminRequeue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ids of failed and dead-lettered rows go back to pending with attempts reset", func(t *testing.T) {
		t.Parallel()
		pool, _ := envtest.MigratedPool(t, "wallet")
		failed := insertOutboxRow(t, pool, "failed", time.Minute)
		dead := insertOutboxRow(t, pool, "dead_letter", time.Minute)
		out, err := admin.New(pool).RequeueOutbox(ctx, failed, dead)
		require.NoError(t, err)
		require.ElementsMatch(t, []uuid.UUID{failed, dead}, out.IDs)
		require.Empty(t, out.Refused)
		for _, id := range []uuid.UUID{failed, dead} {
			status, attempts := outboxStatus(t, pool, id)
			require.Equal(t, "pending", status)
			require.Zero(t, attempts)
		}
	})

	t.Run("pending, acknowledged and unknown rows are refused and left alone", func(t *testing.T) {
		t.Parallel()
		pool, _ := envtest.MigratedPool(t, "wallet")
		pending := insertOutboxRow(t, pool, "pending", time.Minute)
		acked := insertOutboxRow(t, pool, "acknowledged", time.Minute)
		dead := insertOutboxRow(t, pool, "dead_letter", time.Minute)
		unknown := uuid.New()
		out, err := admin.New(pool).RequeueOutbox(ctx, pending, acked, dead, unknown)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{dead}, out.IDs)
		require.ElementsMatch(t, []admin.Refusal{
			{ID: pending, Status: "pending"}, {ID: acked, Status: "acknowledged"}, {ID: unknown},
		}, out.Refused)
		status, _ := outboxStatus(t, pool, acked)
		require.Equal(t, "acknowledged", status)
		status, _ = outboxStatus(t, pool, pending)
		require.Equal(t, "pending", status)
	})

	t.Run("a status moves all its rows and nothing else", func(t *testing.T) {
		t.Parallel()
		pool, _ := envtest.MigratedPool(t, "wallet")
		dead := []uuid.UUID{insertOutboxRow(t, pool, "dead_letter", time.Minute), insertOutboxRow(t, pool, "dead_letter", time.Minute)}
		failed := insertOutboxRow(t, pool, "failed", time.Minute)
		out, err := admin.New(pool).RequeueOutboxStatus(ctx, "dead_letter")
		require.NoError(t, err)
		require.ElementsMatch(t, dead, out.IDs)
		status, _ := outboxStatus(t, pool, failed)
		require.Equal(t, "failed", status)
	})

	t.Run("only failed and dead_letter can be requeued by status", func(t *testing.T) {
		t.Parallel()
		pool, _ := envtest.MigratedPool(t, "wallet")
		acked := insertOutboxRow(t, pool, "acknowledged", time.Minute)
		for _, status := range []string{"pending", "acknowledged", "dispatched", "bogus"} {
			_, err := admin.New(pool).RequeueOutboxStatus(ctx, status)
			require.ErrorIs(t, err, contract.ErrInvalidStatus, status)
		}
		status, _ := outboxStatus(t, pool, acked)
		require.Equal(t, "acknowledged", status)
	})
}

func TestAdminReconcileAcknowledgesWhatTheConsumerHas(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	a := admin.New(pool)
	ctx := context.Background()
	posted := map[uuid.UUID]bool{}
	var ids []uuid.UUID
	for i := range 450 { // more than one page
		id := insertOutboxRow(t, pool, []string{"dispatched", "failed", "dead_letter"}[i%3], time.Hour)
		ids = append(ids, id)
		posted[id] = i%2 == 0
	}
	pending := insertOutboxRow(t, pool, "pending", time.Hour)
	posted[pending] = true
	check := func(_ context.Context, row admin.OutboxRow) (bool, string, error) {
		return posted[row.ID], "entry e-" + row.ID.String()[:8], nil
	}

	dry, err := a.Reconcile(ctx, check, true)
	require.NoError(t, err)
	require.Equal(t, 450, dry.Checked, "pending rows are the relay's, not reconcile's")
	require.Len(t, dry.Changed, 225)
	require.Equal(t, 225, dry.NotPosted)
	stats, err := a.OutboxStats(ctx)
	require.NoError(t, err)
	require.Zero(t, stats.Counts["acknowledged"], "a dry run changes nothing")

	done, err := a.Reconcile(ctx, check, false)
	require.NoError(t, err)
	require.Equal(t, dry.Changed, done.Changed)
	for _, id := range ids {
		status, _ := outboxStatus(t, pool, id)
		if posted[id] {
			require.Equal(t, "acknowledged", status)
		} else {
			require.NotEqual(t, "acknowledged", status)
		}
	}
	status, _ := outboxStatus(t, pool, pending)
	require.Equal(t, "pending", status)

	again, err := a.Reconcile(ctx, check, false)
	require.NoError(t, err)
	require.Empty(t, again.Changed, "a second run finds nothing left to do")

	_, err = a.Reconcile(ctx, func(context.Context, admin.OutboxRow) (bool, string, error) {
		return false, "", errors.New("gl unreachable")
	}, false)
	require.ErrorContains(t, err, "gl unreachable")
}

func TestAdminInboxStatsAndList(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "gl")
	a := admin.New(pool)
	ctx := context.Background()
	q := eventsdb.New(pool)
	claim := func(ids ...string) {
		t.Helper()
		p := eventsdb.ClaimInboxBatchParams{Consumer: "gl"}
		for _, id := range ids {
			p.Ids, p.EventIds = append(p.Ids, "gl:"+id), append(p.EventIds, id)
			p.EventTypes, p.StreamSeqs = append(p.EventTypes, contract.TypeTransferCompleted), append(p.StreamSeqs, 0)
		}
		_, err := q.ClaimInboxBatch(ctx, p)
		require.NoError(t, err)
	}
	// A claim writes its rows processed.
	claim("e0", "e1", "e2")
	for range 2 { // two duplicates of e0
		claim("e0")
	}
	require.NoError(t, q.RecordInboxFailure(ctx, eventsdb.RecordInboxFailureParams{
		ID: "gl:bad", Consumer: "gl", EventID: "bad", EventType: "unknown", Reason: contract.ReasonMalformed, Detail: "decode envelope", Payload: []byte("{not json"), Attempts: 1,
	}))

	stats, err := a.InboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"processing": 0, "waiting": 0, "processed": 3, "failed": 1, "duplicate": 0, "resolved": 0}, stats.Counts)
	require.Equal(t, int64(2), stats.Duplicates)
	require.Equal(t, map[string]int64{"malformed": 1, "conflict": 0, "exhausted": 0, "unauthenticated": 0, "abandoned": 0}, stats.FailedByReason)

	failed, err := a.ListInbox(ctx, "failed", 10)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, "gl:bad", failed[0].ID)
	require.Equal(t, contract.ReasonMalformed, failed[0].Reason)
	require.Equal(t, "decode envelope", failed[0].Detail)
	require.Equal(t, "{not json", failed[0].Payload)

	_, err = a.ListInbox(ctx, "lost", 10)
	require.ErrorIs(t, err, contract.ErrInvalidStatus)
}

func TestAdminOnAnUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := envtest.MigratedPool(t, "wallet")
	pool.Close()
	a := admin.New(pool)
	_, err := a.OutboxStats(ctx)
	require.ErrorIs(t, err, contract.ErrUnavailable)
	_, err = a.GetOutbox(ctx, uuid.Must(uuid.NewV7()))
	require.ErrorIs(t, err, contract.ErrUnavailable)
	require.NotErrorIs(t, err, contract.ErrNotFound)
	require.True(t, database.IsTransient(err), "the driver's error stays in the chain: %v", err)
}
