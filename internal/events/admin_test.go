package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/testenv"
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
	pool, _ := testenv.MigratedPool(t, "wallet")
	admin := events.NewAdmin(pool)
	ctx := context.Background()

	empty, err := admin.OutboxStats(ctx)
	require.NoError(t, err)
	require.Len(t, empty.Counts, 6, "every status is reported, zeros included")
	require.Nil(t, empty.OldestPending)
	require.Nil(t, empty.OldestUnacknowledged)
	emptyOpen, err := admin.OutboxOpen(ctx)
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

	stats, err := admin.OutboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, want, stats.Counts)
	require.InDelta(t, (10 * time.Minute).Seconds(), stats.OldestPendingAge.Seconds(), 5)
	require.InDelta(t, time.Hour.Seconds(), stats.OldestUnacknowledgedAge.Seconds(), 5)
	require.NotNil(t, stats.OldestPending)

	// What the metrics read at every scrape: the same, but for the acknowledged rows.
	open, err := admin.OutboxOpen(ctx)
	require.NoError(t, err)
	delete(want, "acknowledged")
	require.Equal(t, want, open.Rows)
	require.InDelta(t, (10 * time.Minute).Seconds(), open.OldestPending.Seconds(), 5)
	require.InDelta(t, time.Hour.Seconds(), open.OldestUnacknowledged.Seconds(), 5, "a dead letter waits for an operator, not the relay")
}

func TestAdminListsAndShowsOutboxRows(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.MigratedPool(t, "wallet")
	admin := events.NewAdmin(pool)
	ctx := context.Background()
	var dead []uuid.UUID
	for range 3 {
		dead = append(dead, insertOutboxRow(t, pool, "dead_letter", time.Minute))
	}
	insertOutboxRow(t, pool, "pending", time.Minute)

	t.Run("a list holds only rows of the status, oldest first, up to the limit", func(t *testing.T) {
		rows, err := admin.ListOutbox(ctx, "dead_letter", 2)
		require.NoError(t, err)
		require.Len(t, rows, 2)
		require.Equal(t, dead[0], rows[0].ID)
		require.Equal(t, dead[1], rows[1].ID)
		require.Equal(t, "broker refused", rows[0].LastError)
	})
	t.Run("an unknown status is refused", func(t *testing.T) {
		_, err := admin.ListOutbox(ctx, "lost", 10)
		require.ErrorIs(t, err, events.ErrInvalidStatus)
	})
	t.Run("show returns one row with its payload", func(t *testing.T) {
		row, err := admin.GetOutbox(ctx, dead[2])
		require.NoError(t, err)
		require.Equal(t, "dead_letter", row.Status)
		require.Equal(t, "transfer-"+dead[2].String(), row.AggregateID)
		require.JSONEq(t, `{}`, string(row.Payload))
	})
	t.Run("show of an unknown id is not found", func(t *testing.T) {
		_, err := admin.GetOutbox(ctx, uuid.New())
		require.ErrorIs(t, err, events.ErrNotFound)
	})
}

func TestAdminRequeue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ids of failed and dead-lettered rows go back to pending with attempts reset", func(t *testing.T) {
		t.Parallel()
		pool, _ := testenv.MigratedPool(t, "wallet")
		failed := insertOutboxRow(t, pool, "failed", time.Minute)
		dead := insertOutboxRow(t, pool, "dead_letter", time.Minute)
		out, err := events.NewAdmin(pool).RequeueOutbox(ctx, failed, dead)
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
		pool, _ := testenv.MigratedPool(t, "wallet")
		pending := insertOutboxRow(t, pool, "pending", time.Minute)
		acked := insertOutboxRow(t, pool, "acknowledged", time.Minute)
		dead := insertOutboxRow(t, pool, "dead_letter", time.Minute)
		unknown := uuid.New()
		out, err := events.NewAdmin(pool).RequeueOutbox(ctx, pending, acked, dead, unknown)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{dead}, out.IDs)
		require.ElementsMatch(t, []events.Refusal{
			{ID: pending, Status: "pending"}, {ID: acked, Status: "acknowledged"}, {ID: unknown},
		}, out.Refused)
		status, _ := outboxStatus(t, pool, acked)
		require.Equal(t, "acknowledged", status)
		status, _ = outboxStatus(t, pool, pending)
		require.Equal(t, "pending", status)
	})

	t.Run("a status moves all its rows and nothing else", func(t *testing.T) {
		t.Parallel()
		pool, _ := testenv.MigratedPool(t, "wallet")
		dead := []uuid.UUID{insertOutboxRow(t, pool, "dead_letter", time.Minute), insertOutboxRow(t, pool, "dead_letter", time.Minute)}
		failed := insertOutboxRow(t, pool, "failed", time.Minute)
		out, err := events.NewAdmin(pool).RequeueOutboxStatus(ctx, "dead_letter")
		require.NoError(t, err)
		require.ElementsMatch(t, dead, out.IDs)
		status, _ := outboxStatus(t, pool, failed)
		require.Equal(t, "failed", status)
	})

	t.Run("only failed and dead_letter can be requeued by status", func(t *testing.T) {
		t.Parallel()
		pool, _ := testenv.MigratedPool(t, "wallet")
		acked := insertOutboxRow(t, pool, "acknowledged", time.Minute)
		for _, status := range []string{"pending", "acknowledged", "dispatched", "bogus"} {
			_, err := events.NewAdmin(pool).RequeueOutboxStatus(ctx, status)
			require.ErrorIs(t, err, events.ErrInvalidStatus, status)
		}
		status, _ := outboxStatus(t, pool, acked)
		require.Equal(t, "acknowledged", status)
	})
}

func TestAdminReconcileAcknowledgesWhatTheConsumerHas(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.MigratedPool(t, "wallet")
	admin := events.NewAdmin(pool)
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
	check := func(_ context.Context, row events.OutboxRow) (bool, string, error) {
		return posted[row.ID], "entry e-" + row.ID.String()[:8], nil
	}

	dry, err := admin.Reconcile(ctx, check, true)
	require.NoError(t, err)
	require.Equal(t, 450, dry.Checked, "pending rows are the relay's, not reconcile's")
	require.Len(t, dry.Changed, 225)
	require.Equal(t, 225, dry.NotPosted)
	stats, err := admin.OutboxStats(ctx)
	require.NoError(t, err)
	require.Zero(t, stats.Counts["acknowledged"], "a dry run changes nothing")

	done, err := admin.Reconcile(ctx, check, false)
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

	again, err := admin.Reconcile(ctx, check, false)
	require.NoError(t, err)
	require.Empty(t, again.Changed, "a second run finds nothing left to do")

	_, err = admin.Reconcile(ctx, func(context.Context, events.OutboxRow) (bool, string, error) {
		return false, "", errors.New("gl unreachable")
	}, false)
	require.ErrorContains(t, err, "gl unreachable")
}

func TestAdminInboxStatsAndList(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.MigratedPool(t, "gl")
	admin := events.NewAdmin(pool)
	ctx := context.Background()
	q := eventsdb.New(pool)
	claim := func(ids ...string) {
		t.Helper()
		p := eventsdb.ClaimInboxBatchParams{Consumer: "gl"}
		for _, id := range ids {
			p.Ids, p.EventIds = append(p.Ids, "gl:"+id), append(p.EventIds, id)
			p.EventTypes, p.StreamSeqs = append(p.EventTypes, events.TypeTransferCompleted), append(p.StreamSeqs, 0)
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
		ID: "gl:bad", Consumer: "gl", EventID: "bad", EventType: "unknown", Reason: events.ReasonMalformed, Detail: "decode envelope", Payload: []byte("{not json"), Attempts: 1,
	}))

	stats, err := admin.InboxStats(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"processing": 0, "waiting": 0, "processed": 3, "failed": 1, "duplicate": 0}, stats.Counts)
	require.Equal(t, int64(2), stats.Duplicates)
	require.Equal(t, map[string]int64{"malformed": 1, "conflict": 0, "exhausted": 0, "unauthenticated": 0, "abandoned": 0}, stats.FailedByReason)

	failed, err := admin.ListInbox(ctx, "failed", 10)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, "gl:bad", failed[0].ID)
	require.Equal(t, events.ReasonMalformed, failed[0].Reason)
	require.Equal(t, "decode envelope", failed[0].Detail)
	require.Equal(t, "{not json", failed[0].Payload)

	_, err = admin.ListInbox(ctx, "lost", 10)
	require.ErrorIs(t, err, events.ErrInvalidStatus)
}

func TestRetryInboxProcessesAFailedEventOnceAndLeavesABadOneFailed(t *testing.T) {
	t.Parallel()
	pool, _ := testenv.MigratedPool(t, "gl")
	ctx := context.Background()
	q := eventsdb.New(pool)
	goodID, badID := uuid.New(), uuid.New()
	good := envelopeBody(t, goodID, events.TransferCompleted{TransferID: "t-1", FromWalletID: "a", ToWalletID: "b", Amount: 5, Currency: "USD", CreatedAt: time.Now()})
	bad := envelopeBody(t, badID, events.TransferCompleted{TransferID: "t-2", FromWalletID: "a", ToWalletID: "b", Amount: 0, Currency: "USD", CreatedAt: time.Now()})
	for id, body := range map[uuid.UUID][]byte{goodID: good, badID: bad} {
		require.NoError(t, q.RecordInboxFailure(ctx, eventsdb.RecordInboxFailureParams{
			ID: "gl:" + id.String(), Consumer: "gl", EventID: id.String(), EventType: events.TypeTransferCompleted,
			Reason: events.ReasonExhausted, Detail: "handler failed on 10 deliveries", Payload: body, Attempts: 10,
		}))
	}
	handled := map[string]int{}
	// The handler writes in the transaction it is given, as the GL's poster does: if the retry
	// rolled back, the write must be gone too.
	handler := events.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env events.Envelope) error {
		var data events.TransferCompleted
		if err := env.DecodeData(&data); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, event_type, aggregate_id, payload) VALUES ($1, 'TransferPosted.v1', $2, '{}')`, uuid.New(), data.TransferID); err != nil {
			return err
		}
		if err := data.Validate(); err != nil {
			return err
		}
		handled[env.ID]++
		return nil
	})

	out := events.NewInbox("gl", handler).Retry(ctx, pool, goodID.String(), "gl:"+badID.String(), "gl:missing")
	require.Len(t, out, 3)
	require.Equal(t, events.Retried{ID: "gl:" + goodID.String()}, out[0])
	require.Contains(t, out[1].Error, "amount 0 is not positive")
	require.Contains(t, out[2].Error, "not found")

	row, err := q.GetInbox(ctx, "gl:"+goodID.String())
	require.NoError(t, err)
	require.Equal(t, "processed", row.Status)
	require.Equal(t, int32(11), row.Attempts)
	row, err = q.GetInbox(ctx, "gl:"+badID.String())
	require.NoError(t, err)
	require.Equal(t, "failed", row.Status, "a retry that fails again rolls back")
	require.Equal(t, int32(10), row.Attempts)
	var acks int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE aggregate_id IN ('t-1', 't-2')`).Scan(&acks))
	require.Equal(t, 1, acks, "only the good event's write committed")

	again := events.NewInbox("gl", handler).Retry(ctx, pool, goodID.String())
	require.Contains(t, again[0].Error, "is processed, only a failed or waiting event is retried")
	require.Equal(t, 1, handled[goodID.String()], "a processed event is never handled again")
}

func TestAdminOnAnUnreachableDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testenv.MigratedPool(t, "wallet")
	pool.Close()
	admin := events.NewAdmin(pool)
	_, err := admin.OutboxStats(ctx)
	require.ErrorIs(t, err, events.ErrUnavailable)
	_, err = admin.GetOutbox(ctx, uuid.Must(uuid.NewV7()))
	require.ErrorIs(t, err, events.ErrUnavailable)
	require.NotErrorIs(t, err, events.ErrNotFound)
	require.True(t, database.IsTransient(err), "the driver's error stays in the chain: %v", err)
}
