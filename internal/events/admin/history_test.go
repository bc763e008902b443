package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/internal/eventsdb"
)

// refuse claims row as a relay would and has the broker refuse its publish (MarkFailed).
func refuse(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, maxAttempts int32, cause string) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `UPDATE outbox SET status = 'dispatching', attempts = attempts + 1,
		lease_owner = 'relay-1', lease_until = now() + interval '30 seconds' WHERE id = $1`, id)
	require.NoError(t, err)
	n, err := eventsdb.New(pool).MarkFailed(ctx, eventsdb.MarkFailedParams{
		ID: id, Owner: "relay-1", MaxAttempts: maxAttempts, LastError: cause, NextAttemptAt: time.Now().Add(time.Second),
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

// A requeue resets a row's attempts and last error, and its history keeps every refused publish
// with the requeue itself; the admin API's rows carry it.
func TestTheAttemptHistorySurvivesARequeue(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	a := admin.New(pool)
	id := insertOutboxRow(t, pool, "pending", 0)

	refuse(t, pool, id, 2, "nats: message size exceeds maximum allowed")
	refuse(t, pool, id, 2, "nats: no responders available for request")
	row, err := a.GetOutbox(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "dead_letter", row.Status)
	require.EqualValues(t, 2, row.Attempts)

	out, err := a.RequeueOutbox(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{id}, out.IDs)
	row, err = a.GetOutbox(ctx, id)
	require.NoError(t, err)
	require.Equal(t, "pending", row.Status)
	require.Zero(t, row.Attempts, "a requeue starts the attempts again")
	require.Empty(t, row.LastError)
	require.Len(t, row.History, 3)
	for i, want := range []admin.Attempt{
		{Attempt: 1, Status: "failed", Error: "nats: message size exceeds maximum allowed"},
		{Attempt: 2, Status: "dead_letter", Error: "nats: no responders available for request"},
		{Attempt: 2, Status: admin.StatusRequeued},
	} {
		got := row.History[i]
		require.False(t, got.At.IsZero(), "entry %d is dated", i)
		got.At = time.Time{}
		require.Equal(t, want, got, "entry %d", i)
	}

	refuse(t, pool, id, 2, "after the requeue")
	rows, err := a.ListOutbox(ctx, "failed", 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Len(t, rows[0].History, 4, "the history goes on after the requeue")
	require.Equal(t, admin.Attempt{Attempt: 1, Status: "failed", Error: "after the requeue"}, func() admin.Attempt {
		h := rows[0].History[3]
		h.At = time.Time{}
		return h
	}())
	raw, err := json.Marshal(rows[0])
	require.NoError(t, err)
	require.Contains(t, string(raw), `"attempt_history":[{"attempt":1,"status":"failed","error":"nats: message size exceeds maximum allowed","at":`)
}

// A row whose relay died holding it with its attempts used up is dead-lettered with that said
// in its history.
func TestAnAbandonedLeaseIsInTheHistory(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	id := insertOutboxRow(t, pool, "pending", 0)
	_, err := pool.Exec(ctx, `UPDATE outbox SET status = 'dispatching', attempts = 3, lease_owner = 'gone',
		lease_until = now() - interval '1 second' WHERE id = $1`, id)
	require.NoError(t, err)
	n, err := eventsdb.New(pool).DeadLetterAbandoned(ctx, 3)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	row, err := admin.New(pool).GetOutbox(ctx, id)
	require.NoError(t, err)
	require.Len(t, row.History, 1)
	require.Equal(t, "dead_letter", row.History[0].Status)
	require.EqualValues(t, 3, row.History[0].Attempt)
	require.Equal(t, "lease expired with the maximum attempts used", row.History[0].Error)
}

// The history is bounded: the newest admin.MaxHistory entries, each error clipped.
func TestTheAttemptHistoryKeepsTheNewestEntries(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	a := admin.New(pool)
	id := insertOutboxRow(t, pool, "pending", 0)
	for i := 1; i <= admin.MaxHistory+5; i++ {
		refuse(t, pool, id, 1000, fmt.Sprintf("refusal %d %s", i, strings.Repeat("x", 600)))
	}
	row, err := a.GetOutbox(ctx, id)
	require.NoError(t, err)
	require.Len(t, row.History, admin.MaxHistory)
	require.EqualValues(t, 6, row.History[0].Attempt, "the oldest five are gone")
	require.EqualValues(t, admin.MaxHistory+5, row.History[admin.MaxHistory-1].Attempt)
	require.Len(t, []rune(row.History[0].Error), 500, "an error is clipped")
	_, err = pool.Exec(ctx, `UPDATE outbox SET status = 'acknowledged', acknowledged_at = now() - interval '1 hour' WHERE id = $1`, id)
	require.NoError(t, err)
	n, err := eventsdb.New(pool).DeleteAcknowledged(ctx, eventsdb.DeleteAcknowledgedParams{Before: time.Now(), BatchSize: 10})
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "retention deletes the row, and its history with it")
}

// The header's counts read each status's partial index, at most admin.HealthCap rows each.
func TestHealthCountsTheRowsThatNeedALookUpToTheCap(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	a := admin.New(pool)
	h, err := a.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, admin.Health{}, h, "nothing needs a look")

	insertOutboxRow(t, pool, "failed", 0)
	insertOutboxRow(t, pool, "acknowledged", 0)
	_, err = pool.Exec(ctx, `
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, last_error)
		SELECT gen_random_uuid(), 'TransferCompleted.v1', 't', '{}', 'dead_letter', 10, 'refused' FROM generate_series(1, $1::int)`,
		admin.HealthCap+3)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO inbox (id, consumer, event_id, event_type, status, reason, detail, waits_for, payload)
		VALUES ('wallet:e1', 'wallet', 'e1', 'TransferPosted.v2', 'failed', 'malformed', 'bad', NULL, '\x00'),
		       ('wallet:e2', 'wallet', 'e2', 'TransferPosted.v2', 'waiting', NULL, NULL, 'transfer:x', '\x00')`)
	require.NoError(t, err)
	h, err = a.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, admin.Health{
		OutboxFailed:     admin.Count{N: 1},
		OutboxDeadLetter: admin.Count{N: admin.HealthCap, AtLeast: true},
		InboxFailed:      admin.Count{N: 1},
		InboxWaiting:     admin.Count{N: 1},
	}, h)
	require.Equal(t, fmt.Sprintf("%d+", admin.HealthCap), h.OutboxDeadLetter.String())
}

// planNode is the part of an auto_explain JSON plan that says how a node reads.
type planNode struct {
	NodeType string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []planNode `json:"Plans"`
}

// Right after a bulk load of acknowledged rows, before any ANALYZE, in a generic plan, the
// header's counts and the default outbox page read their partial indexes, never a table.
func TestTheHeadersCountsAndTheDefaultOutboxPageUseTheirIndexesBeforeAnyAnalyze(t *testing.T) {
	t.Parallel()
	pool, url := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, acknowledged_at, dispatched_at)
		SELECT gen_random_uuid(), 'TransferCompleted.v1', 't-' || i, '{}', 'acknowledged', now(), now()
		FROM generate_series(1, 50000) AS i;
		INSERT INTO inbox (id, consumer, event_id, event_type, status, processed_at)
		SELECT 'wallet:' || i, 'wallet', i::text, 'TransferPosted.v2', 'processed', now()
		FROM generate_series(1, 50000) AS i;`)
	require.NoError(t, err)
	insertOutboxRow(t, pool, "dead_letter", 0)
	insertOutboxRow(t, pool, "pending", 0)
	var analyzed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stats WHERE tablename IN ('outbox', 'inbox')`).Scan(&analyzed))
	require.Zero(t, analyzed, "no statistics yet")

	var mu sync.Mutex
	var notices []string
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, n.Message)
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		for _, set := range []string{
			"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_format = json",
			"SET auto_explain.log_level = notice", "SET auto_explain.log_nested_statements = on", "SET client_min_messages = notice",
		} {
			if _, err := conn.Exec(ctx, set); err != nil {
				return err
			}
		}
		return nil
	}
	explained, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(explained.Close)
	a := admin.New(explained)

	h, err := a.Health(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, h.OutboxDeadLetter.N)
	page, err := a.BrowseOutbox(ctx, admin.Browse{Status: admin.BrowseUnacknowledged, Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Rows, 2, "the pending row and the dead letter, not the acknowledged ones")

	mu.Lock()
	defer mu.Unlock()
	for _, query := range []string{"EventsHealth", "BrowseOutboxUnacknowledged"} {
		found := false
		var indexes []string
		var walk func(planNode)
		walk = func(n planNode) {
			require.False(t, n.NodeType == "Seq Scan" && (n.Relation == "outbox" || n.Relation == "inbox"), "%s: a sequential scan: %+v", query, n)
			if n.Index != "" {
				indexes = append(indexes, n.Index)
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		for _, notice := range notices {
			_, plan, ok := strings.Cut(notice, "plan:")
			if !ok || !strings.Contains(plan, "-- name: "+query+" ") {
				continue
			}
			var p struct {
				Plan planNode `json:"Plan"`
			}
			require.NoError(t, json.Unmarshal([]byte(plan), &p))
			walk(p.Plan)
			found = true
		}
		require.True(t, found, "auto_explain showed the plan of %s", query)
		t.Logf("%s: %v", query, indexes)
		switch query {
		case "EventsHealth":
			require.Subset(t, indexes, []string{"outbox_failed_idx", "outbox_dead_letter_idx", "inbox_failed_idx", "inbox_waiting_idx"})
		case "BrowseOutboxUnacknowledged":
			require.Contains(t, indexes, "outbox_unacknowledged_idx")
		}
	}
}
