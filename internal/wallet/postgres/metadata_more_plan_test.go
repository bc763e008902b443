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

// TestTheWalletAndHoldMetadataFiltersUseTheirIndexesBeforeAnyAnalyze: right after a bulk load,
// before any ANALYZE, the wallet and hold listings filtered by metadata find their few rows
// through their GIN indexes, in generic plans, rather than walking every row in listing order.
func TestTheWalletAndHoldMetadataFiltersUseTheirIndexesBeforeAnyAnalyze(t *testing.T) {
	t.Parallel()
	filter := metadata.Metadata{"order_id": "o-0"}
	for _, tt := range []struct {
		name, load, relation, index, query string
		list                               func(context.Context, *postgres.Store) (int, error)
	}{
		{
			name: "the wallets", relation: "wallets", index: "wallets_metadata_idx", query: "ListWalletsByMetadata",
			load: `INSERT INTO wallets (id, currency, metadata)
				SELECT 'w-' || i, 'USD', CASE WHEN i % 5000 = 0 THEN jsonb_build_object('order_id', 'o-' || (i % 2)) ELSE '{}' END
				FROM generate_series(1, 40000) AS i;`,
			list: func(ctx context.Context, s *postgres.Store) (int, error) {
				first, err := s.ListWallets(ctx, wallet.WalletQuery{Metadata: filter, Limit: 2})
				if err != nil {
					return 0, err
				}
				page, err := s.ListWallets(ctx, wallet.WalletQuery{Metadata: filter, Before: first.Next, Limit: 2})
				return len(page.Wallets), err
			},
		},
		{
			name: "the holds", relation: "holds", index: "holds_metadata_idx", query: "ListHoldsByMetadata",
			load: `INSERT INTO wallets (id, currency) VALUES ('alice', 'USD');
				INSERT INTO holds (id, idempotency_key, request_hash, wallet_id, amount, currency, expires_at, placed_event_id, metadata)
				SELECT gen_random_uuid(), 'k-' || i, '\x00', 'alice', 1, 'USD', now() + interval '1 day', gen_random_uuid(),
				       CASE WHEN i % 5000 = 0 THEN jsonb_build_object('order_id', 'o-' || (i % 2)) ELSE '{}' END
				FROM generate_series(1, 40000) AS i;`,
			list: func(ctx context.Context, s *postgres.Store) (int, error) {
				first, err := s.ListHolds(ctx, wallet.HoldQuery{Metadata: filter, Limit: 2})
				if err != nil {
					return 0, err
				}
				page, err := s.ListHolds(ctx, wallet.HoldQuery{Metadata: filter, After: first.Next, Limit: 2})
				return len(page.Holds), err
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, url := envtest.MigratedPool(t, "wallet")
			ctx := context.Background()
			_, err := pool.Exec(ctx, tt.load)
			require.NoError(t, err)
			var analyzed int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stats WHERE tablename = $1`, tt.relation).Scan(&analyzed))
			require.Zero(t, analyzed, "%s has no statistics yet", tt.relation)

			store, notices := explainedStore(t, url)
			n, err := tt.list(ctx, store)
			require.NoError(t, err)
			require.Equal(t, 2, n, "8 rows carry the pair; the second page")

			var indexes []string
			pages := 0
			var walk func(planNode)
			walk = func(n planNode) {
				require.False(t, n.NodeType == "Seq Scan" && n.Relation == tt.relation, "a sequential scan of %s: %+v", tt.relation, n)
				if n.Index != "" {
					indexes = append(indexes, n.Index)
				}
				if n.Relation == tt.relation {
					pages += n.SharedHit
				}
				for _, c := range n.Plans {
					walk(c)
				}
			}
			found := false
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
				found = true
			}
			require.True(t, found, "auto_explain showed the plan of %s", tt.query)
			t.Logf("%s: %d pages, indexes %v", tt.relation, pages, indexes)
			require.Contains(t, indexes, tt.index)
			// The index's few pages and the matches' heap and primary key pages, of a table of
			// hundreds of pages.
			require.LessOrEqual(t, pages, 80, "the filter read %d pages of %s", pages, tt.relation)
		})
	}
}

// explainedStore is a store on url whose one connection plans generically and has
// auto_explain show every plan it runs, with its buffers; notices returns those shown so far.
func explainedStore(t *testing.T, url string) (store *postgres.Store, notices func() []string) {
	t.Helper()
	var mu sync.Mutex
	var shown []string
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		shown = append(shown, n.Message)
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
	explained, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(explained.Close)
	return postgres.NewStore(explained, postgres.Options{}), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), shown...)
	}
}
