package postgres_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

// TestBalanceCheckLooksUpOnlyTheEntriesItsStatementTouched is the plan behind the per-statement
// balance check (db/schema/gl/00009): a session keeps a PL/pgSQL trigger's plan, and one made
// on a younger, never-analyzed ledger must not walk the whole ledger once it has grown. The
// session here keeps the generic plan it made for a statement of 1,000 entries' lines on a
// ledger of 5,000 (as any client in the default plan_cache_mode does after five executions; the
// check of 00005 then read journal_entries whole), the ledger grows to 16,000 entries from
// another connection, and auto_explain, at NOTICE for this session, shows how many rows of
// journal_entries the check read for an INSERT of two entries' lines.
func TestBalanceCheckLooksUpOnlyTheEntriesItsStatementTouched(t *testing.T) {
	t.Parallel()
	pool, url := envtest.MigratedPool(t, "gl")
	ctx := context.Background()

	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	cfg.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	var mu sync.Mutex
	var notices []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	postUSDEntries(t, pool, 5000)
	postUSDEntries(t, conn, 1000) // the session's plan of the check is made now, for a large statement
	postUSDEntries(t, pool, 10000)

	for _, set := range []string{
		"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_analyze = on", "SET auto_explain.log_level = notice", "SET client_min_messages = notice",
	} {
		_, err := conn.Exec(ctx, set)
		require.NoError(t, err, set)
	}
	postUSDEntries(t, conn, 2)

	mu.Lock()
	defer mu.Unlock()
	var plan string
	for _, n := range notices {
		if strings.Contains(n, "new_lines") {
			plan = n
		}
	}
	require.NotEmpty(t, plan, "auto_explain showed the balance check's plan; notices: %q", notices)
	read := 0
	actual := regexp.MustCompile(`actual time=[0-9.]+\.\.[0-9.]+ rows=(\d+) loops=(\d+)`)
	for line := range strings.Lines(plan) {
		if !strings.Contains(line, "on journal_entries") {
			continue
		}
		m := actual.FindStringSubmatch(line)
		require.NotNil(t, m, "no row count in %q", line)
		rows, _ := strconv.Atoi(m[1])
		loops, _ := strconv.Atoi(m[2])
		read += rows * loops
	}
	require.Positive(t, read, "the plan reads journal_entries: %s", plan)
	require.LessOrEqual(t, read, 2, "the check of a statement that touched 2 entries read %d rows of journal_entries of 16,002:\n%s", read, plan)
}

// execer is a pool, a connection or a transaction.
type execer interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

// postUSDEntries writes n balanced entries of 100 USD from 1010 to 2010 in one statement, with
// the database's posting times.
func postUSDEntries(t *testing.T, db execer, n int) {
	t.Helper()
	_, err := db.Exec(context.Background(), `
		WITH e AS (
			INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			SELECT gen_random_uuid(), 'ev-' || gen_random_uuid(), 'tr-' || gen_random_uuid(), 'USD', now()
			FROM generate_series(1, $1::int)
			RETURNING id)
		INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id)
		SELECT id, v.account, v.direction, 100, 'USD', 'w-1' FROM e, (VALUES ('1010', 'debit'), ('2010', 'credit')) AS v(account, direction)`, n)
	require.NoError(t, err)
}
