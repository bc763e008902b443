package postgres_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/metadata"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// planNode is the part of an auto_explain JSON plan that says how a node reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	Index     string     `json:"Index Name"`
	SharedHit int        `json:"Shared Hit Blocks"`
	Plans     []planNode `json:"Plans"`
}

// TestTheMetadataFilterUsesItsIndexBeforeAnyAnalyze: right after a bulk load, before any
// ANALYZE, a transfer listing filtered by metadata finds its few transfers through the GIN
// index (transfers_metadata_idx), in a generic plan, rather than walking every transfer in
// listing order and filtering.
func TestTheMetadataFilterUsesItsIndexBeforeAnyAnalyze(t *testing.T) {
	t.Parallel()
	pool, url := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		INSERT INTO wallets (id, currency, allow_negative) VALUES ('mint', 'USD', true), ('alice', 'USD', false);
		INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, metadata)
		SELECT gen_random_uuid(), 'k-' || i, '\x00', 'mint', 'alice', 1, 'USD', gen_random_uuid(),
		       CASE WHEN i % 5000 = 0 THEN jsonb_build_object('order_id', 'o-' || (i % 2)) ELSE '{}' END
		FROM generate_series(1, 40000) AS i;`)
	require.NoError(t, err)
	var analyzed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stats WHERE tablename = 'transfers'`).Scan(&analyzed))
	require.Zero(t, analyzed, "transfers has no statistics yet")

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
			"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_analyze = on",
			"SET auto_explain.log_buffers = on", "SET auto_explain.log_format = json",
			"SET auto_explain.log_level = notice", "SET client_min_messages = notice",
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
	store := postgres.NewStore(explained, postgres.Options{})

	page, err := store.ListTransfers(ctx, wallet.TransferQuery{Metadata: metadata.Metadata{"order_id": "o-0"}, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Transfers, 2)
	mu.Lock()
	notices = nil
	mu.Unlock()
	page, err = store.ListTransfers(ctx, wallet.TransferQuery{Metadata: metadata.Metadata{"order_id": "o-0"}, After: page.Next, Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Transfers, 2, "8 transfers carry the pair; the second page")

	mu.Lock()
	defer mu.Unlock()
	var indexes []string
	pages := 0
	var walk func(planNode)
	walk = func(n planNode) {
		require.False(t, n.NodeType == "Seq Scan" && n.Relation == "transfers", "a sequential scan of transfers: %+v", n)
		if n.Index != "" {
			indexes = append(indexes, n.Index)
		}
		if n.Relation == "transfers" {
			pages += n.SharedHit
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	found := false
	for _, n := range notices {
		_, plan, ok := strings.Cut(n, "plan:")
		if !ok || !strings.Contains(plan, "-- name: ListTransfersByMetadata ") {
			continue
		}
		var explainedPlan struct {
			Plan planNode `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(plan), &explainedPlan))
		walk(explainedPlan.Plan)
		found = true
	}
	require.True(t, found, "auto_explain showed the plan of ListTransfersByMetadata")
	t.Logf("transfers: %d pages, indexes %v", pages, indexes)
	require.Contains(t, indexes, "transfers_metadata_idx")
	// The index's few pages, and the 8 matches' heap and primary key pages (about 30), of a
	// table of about 600 pages.
	require.LessOrEqual(t, pages, 60, "the filter read %d pages of transfers", pages)
}
