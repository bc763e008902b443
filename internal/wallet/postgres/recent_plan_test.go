package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/wallet"
)

// TestTheConsolesTransferListReadsItsIndexesBeforeAnyAnalyze: right after a bulk load, before
// any ANALYZE, the console's newest-first list, whole or by its event's status, reads a page
// of transfers through an index in a generic plan (a rare status through the outbox's
// backlog, a batch's legs through their batch), never every transfer; and it is newest first
// across pages.
func TestTheConsolesTransferListReadsItsIndexesBeforeAnyAnalyze(t *testing.T) {
	t.Parallel()
	pool, url := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO wallets (id, currency, allow_negative) VALUES ('mint', 'USD', true), ('alice', 'USD', false);
		INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_at)
		SELECT gen_random_uuid(), 'k-' || i, '\x00', 'mint', 'alice', 1, 'USD', gen_random_uuid(), now() - (40001 - i) * interval '1 second'
		FROM generate_series(1, 40000) AS i;
		-- The newest 2000 events acknowledged and kept; the older ones deleted by retention.
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, acknowledged_at)
		SELECT event_id, 'TransferCompleted.v1', id::text, '{}', 'acknowledged', now() FROM transfers ORDER BY created_at DESC LIMIT 2000;
		-- Three transfers in the middle of the history whose events the broker refused.
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, last_error)
		SELECT event_id, 'TransferCompleted.v1', id::text, '{}', 'failed', 1, 'refused' FROM transfers WHERE idempotency_key IN ('k-20000', 'k-20001', 'k-20002');
		-- A batch of three legs whose one event is a dead letter.
		INSERT INTO transfer_batches (id, idempotency_owner, idempotency_key, request_hash, legs, event_id, created_at)
		VALUES ('00000000-0000-0000-0000-0000000000b1', '', 'batch-1', '\x00', 3, '00000000-0000-0000-0000-0000000000e1', now() - interval '1 day');
		INSERT INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, batch_id, batch_leg, created_at)
		SELECT gen_random_uuid(), 'batch:b1:' || i, 'batch-1', '\x00', 'mint', 'alice', 1, 'USD', '00000000-0000-0000-0000-0000000000e1',
		       '00000000-0000-0000-0000-0000000000b1', i, now() - interval '1 day' + i * interval '1 millisecond'
		FROM generate_series(0, 2) AS i;
		INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, last_error)
		VALUES ('00000000-0000-0000-0000-0000000000e1', 'TransferBatchCompleted.v1', '00000000-0000-0000-0000-0000000000b1', '{}', 'dead_letter', 10, 'too big');`)
	require.NoError(t, err)
	var analyzed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stats WHERE tablename IN ('transfers', 'outbox')`).Scan(&analyzed))
	require.Zero(t, analyzed, "no statistics yet")

	for _, tt := range []struct {
		name, status, query string
		pageSize, total     int
		keys                []string // the first page's Idempotency-Keys, newest first
	}{
		{name: "every transfer, newest first", status: "", query: "ListTransfersNewest", pageSize: 50, total: 100,
			keys: []string{"k-40000", "k-39999"}},
		{name: "the acknowledged ones", status: "acknowledged", query: "ListTransfersNewestAcknowledged", pageSize: 50, total: 100,
			keys: []string{"k-40000", "k-39999"}},
		{name: "the failed ones, from the outbox's backlog", status: "failed", query: "ListTransfersNewestByEventStatus", pageSize: 2, total: 3,
			keys: []string{"k-20002", "k-20001"}},
		{name: "a dead-lettered batch's legs", status: "dead_letter", query: "ListTransfersNewestByEventStatus", pageSize: 2, total: 3,
			keys: []string{"batch-1", "batch-1"}},
		{name: "every unacknowledged one", status: wallet.EventUnacknowledged, query: "ListTransfersNewestByEventStatus", pageSize: 4, total: 6,
			keys: []string{"k-20002", "k-20001", "k-20000", "batch-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store, notices := explainedStore(t, url)
			first, err := store.ListRecentTransfers(ctx, wallet.RecentQuery{EventStatus: tt.status, Limit: tt.pageSize})
			require.NoError(t, err)
			require.NotZero(t, first.Next, "a second page")
			second, err := store.ListRecentTransfers(ctx, wallet.RecentQuery{EventStatus: tt.status, Before: first.Next, Limit: tt.pageSize})
			require.NoError(t, err)
			all := append(first.Transfers, second.Transfers...)
			if tt.total < 2*tt.pageSize {
				require.Len(t, all, tt.total)
				require.Zero(t, second.Next, "the last page")
			}
			for i, k := range tt.keys {
				require.Equal(t, k, all[i].IdempotencyKey, "transfer %d", i)
			}
			for i := 1; i < len(all); i++ {
				require.True(t, all[i].Cursor().CreatedAt.Before(all[i-1].CreatedAt) ||
					(all[i].CreatedAt.Equal(all[i-1].CreatedAt) && all[i].ID.String() < all[i-1].ID.String()), "newest first at %d", i)
				if tt.status != "" && tt.status != wallet.EventUnacknowledged {
					require.Equal(t, tt.status, all[i].OutboxStatus)
				}
			}

			pages, found := 0, 0
			var walk func(planNode)
			walk = func(n planNode) {
				require.False(t, n.NodeType == "Seq Scan" && (n.Relation == "transfers" || n.Relation == "outbox"), "a sequential scan of %s: %+v", n.Relation, n)
				if n.Relation == "transfers" {
					pages += n.SharedHit
				}
				for _, c := range n.Plans {
					walk(c)
				}
			}
			for _, n := range notices() {
				_, plan, ok := strings.Cut(n, "plan:")
				if !ok || !strings.Contains(plan, "-- name: "+tt.query+" ") {
					continue
				}
				var explainedPlan struct {
					Plan planNode `json:"Plan"`
				}
				require.NoError(t, json.Unmarshal([]byte(plan), &explainedPlan))
				walk(explainedPlan.Plan)
				found++
			}
			require.Equal(t, 2, found, "auto_explain showed both pages' plans of %s", tt.query)
			t.Logf("%s: %d pages of transfers", tt.query, pages)
			// Two pages of at most 50 transfers, each with its index and heap pages, of a table
			// of about 600 pages.
			require.LessOrEqual(t, pages, 250, "the list read %d pages of transfers", pages)
		})
	}
}
