package postgres_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

// explainedPool is a pool of one connection that plans every prepared statement generically
// (as PostgreSQL may choose to after five executions) and has auto_explain report each
// statement's plan, with the pages each node touched, as a NOTICE.
type explainedPool struct {
	pool    *pgxpool.Pool
	mu      sync.Mutex
	notices []string
}

func newExplainedPool(t *testing.T, url string) *explainedPool {
	t.Helper()
	p := &explainedPool{}
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		p.mu.Lock()
		p.notices = append(p.notices, n.Message)
		p.mu.Unlock()
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
	p.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.pool.Close)
	return p
}

// pagesRead runs read and returns the pages of relation that the statement named query (its
// sqlc name) touched in its plan's scans.
func (p *explainedPool) pagesRead(t *testing.T, query, relation string, read func() error) int {
	t.Helper()
	pages := 0
	for _, n := range p.scansOf(t, query, relation, read) {
		pages += n.SharedHit + n.SharedRead
	}
	return pages
}

// TestReadsStayBoundedInAGenericPlan: a balance and the trial balance as of a time, a
// statement's later page or its page from a time and a later page of entries read only what they return and what lies between them and the
// checkpoint before, however long the history after and before them, in a generic plan too.
// A bound written `$1 IS NULL OR posted_at <= $1` is an index condition only in a plan made
// for the value; in a generic one it filtered the account's whole history (db/schema/gl/00010).
func TestReadsStayBoundedInAGenericPlan(t *testing.T) {
	t.Parallel()
	pool, url := envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	ledger := postgres.NewLedger(pool)
	checkpoint := func() {
		t.Helper()
		time.Sleep(1100 * time.Millisecond) // the bound is a second before now
		_, taken, err := ledger.Checkpoint(ctx)
		require.NoError(t, err)
		require.True(t, taken)
	}

	// 20,000 entries (40,000 lines) around a window of 10 entries, a checkpoint before the
	// window and one after all of it.
	postUSDEntries(t, pool, 10_000)
	checkpoint()
	time.Sleep(10 * time.Millisecond)
	postUSDEntries(t, pool, 10)
	var asOf time.Time
	var lineInWindow int64
	var entryInWindow string
	require.NoError(t, pool.QueryRow(ctx, `SELECT max(posted_at) FROM journal_lines`).Scan(&asOf))
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM journal_lines WHERE account_code = '2010' AND posted_at <= $1
		ORDER BY posted_at DESC, id DESC OFFSET 5 LIMIT 1`, asOf).Scan(&lineInWindow))
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text FROM journal_entries WHERE posted_at <= $1
		ORDER BY posted_at DESC, id DESC OFFSET 5 LIMIT 1`, asOf).Scan(&entryInWindow))
	time.Sleep(10 * time.Millisecond)
	postUSDEntries(t, pool, 10_000)
	checkpoint()
	_, err := pool.Exec(ctx, "VACUUM ANALYZE journal_lines, journal_entries, balance_checkpoints")
	require.NoError(t, err)

	explained := newExplainedPool(t, url)
	reads := postgres.NewLedger(explained.pool)
	// A read bounded to the window descends an index or two (their inner pages and a leaf or
	// two each): 3–14 pages. Filtering either side's history instead read 108–302.
	const bound = 20
	for _, tc := range []struct {
		name, query, relation string
		read                  func() error
	}{
		{"balance as of a time", "AccountBalance", "journal_lines", func() error {
			b, err := reads.AccountBalance(ctx, "2010", "USD", &asOf)
			if err == nil {
				require.Equal(t, gl.SumOf(100*10_010), b.Balance())
			}
			return err
		}},
		{"a statement's page after a cursor", "AccountStatement", "journal_lines", func() error {
			st, err := reads.Statement(ctx, gl.StatementQuery{AccountCode: "2010", Currency: "USD", After: strconv.FormatInt(lineInWindow, 10), Limit: 3})
			if err == nil {
				require.Len(t, st.Lines, 3)
				require.Equal(t, gl.SumOf(100*(10_000+5+3)), st.Lines[2].RunningBalance)
			}
			return err
		}},
		{"a statement from a time", "AccountStatement", "journal_lines", func() error {
			st, err := reads.Statement(ctx, gl.StatementQuery{AccountCode: "2010", Currency: "USD", From: &asOf, Limit: 3})
			if err == nil {
				require.Len(t, st.Lines, 3)
				require.Equal(t, gl.SumOf(100*(10_010+2)), st.Lines[2].RunningBalance) // from the window's last line on
			}
			return err
		}},
		{"the trial balance as of a time", "TrialBalance", "journal_lines", func() error {
			tb, err := reads.TrialBalanceAsOf(ctx, &asOf)
			if err == nil {
				require.Len(t, tb.Currencies, 1)
				require.Equal(t, gl.SumOf(100*10_010), tb.Currencies[0].Debits)
			}
			return err
		}},
		{"entries after a cursor", "ListEntriesPosted", "journal_entries", func() error {
			page, err := reads.Entries(ctx, gl.EntryQuery{After: entryInWindow, Limit: 3})
			if err == nil {
				require.Len(t, page.Entries, 3)
			}
			return err
		}},
		{"entries from a time", "ListEntriesPosted", "journal_entries", func() error {
			page, err := reads.Entries(ctx, gl.EntryQuery{From: &asOf, Limit: 3})
			if err == nil {
				require.Len(t, page.Entries, 3)
			}
			return err
		}},
	} {
		pages := explained.pagesRead(t, tc.query, tc.relation, tc.read)
		t.Logf("%s: %d pages of %s", tc.name, pages, tc.relation)
		require.Positive(t, pages, "%s: the plan reads %s", tc.name, tc.relation)
		require.LessOrEqual(t, pages, bound, "%s: %d pages of %s, in a generic plan", tc.name, pages, tc.relation)
	}
}
