package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"walletgl/db"
	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
)

func TestParseQueriesReadsTheRealFiles(t *testing.T) {
	t.Parallel()
	qs, err := ParseQueries(db.Queries(), "wallet")
	require.NoError(t, err)
	q, ok := qs["LockWallets"]
	require.True(t, ok, "LockWallets is in db/queries/wallet")
	assert.Equal(t, "wallet/wallets.sql", q.File)
	assert.True(t, strings.HasPrefix(q.SQL, "SELECT id, currency, balance, held, allow_negative"), "comments are dropped: %q", q.SQL)
	assert.True(t, strings.HasSuffix(q.SQL, "FOR NO KEY UPDATE"), "the trailing semicolon is dropped: %q", q.SQL)
	assert.Equal(t, []string{"ids"}, q.Params())
}

func TestBindNeedsEveryParameter(t *testing.T) {
	t.Parallel()
	q := Query{Name: "X", SQL: "SELECT @a::int, sqlc.narg('b')::text, @a"}
	sql, err := q.Bind(map[string]string{"a": ":n", "b": "'x'"})
	require.NoError(t, err)
	assert.Equal(t, "SELECT (:n)::int, ('x')::text, (:n)", sql)
	_, err = q.Bind(map[string]string{"a": ":n"})
	assert.ErrorContains(t, err, "[b]")
}

func TestWalletScriptRunsTheTransfersStatements(t *testing.T) {
	t.Parallel()
	s, err := WalletScript(db.Queries(), 50, `{"x":1}`)
	require.NoError(t, err)
	assert.Equal(t, 1, s.Events)
	assert.Equal(t, "50", s.Vars["users"])
	for _, want := range []string{
		"\\set from random(1, :users)",
		"BEGIN;",
		"INSERT INTO transfers (id, idempotency_owner, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id, created_by_key, reference, metadata)",
		"ON CONFLICT (idempotency_owner, idempotency_key) DO NOTHING",
		"FOR NO KEY UPDATE;",
		"UPDATE wallets w",
		"INSERT " + database.FixedPlan + " INTO outbox (id, event_type, aggregate_id, payload, trace_context, status, attempts, lease_owner, lease_until)",
		"ARRAY[(:payload)::jsonb]",
		"COMMIT;",
	} {
		assert.Contains(t, s.Text, want)
	}
	assert.NotContains(t, s.Text, "@", "no sqlc parameter is left")
	assert.Less(t, strings.Index(s.Text, "INSERT INTO transfers"), strings.Index(s.Text, "INTO outbox"), "statements in the store's order")
}

// assertVerbatim checks that text runs the named query of db/queries/<set> as written: every
// piece of its SQL between two sqlc parameters appears in text, in order. It returns where the
// statement starts in text.
func assertVerbatim(t *testing.T, text, set, name string) int {
	t.Helper()
	qs, err := ParseQueries(db.Queries(), set)
	require.NoError(t, err)
	q, ok := qs[name]
	require.True(t, ok, "%s is in db/queries/%s", name, set)
	start, at := -1, 0
	for _, piece := range sqlcParam.Split(q.SQL, -1) {
		i := strings.Index(text[at:], piece)
		if !assert.GreaterOrEqual(t, i, 0, "%s: %q is in the script after offset %d", name, piece, at) {
			return start
		}
		if start < 0 {
			start = at + i
		}
		at += i + len(piece)
	}
	assert.Contains(t, text, "-- "+name+" ("+q.File+")", "the statement is labelled")
	return start
}

func TestGLScriptRunsTheBatchPostingStatements(t *testing.T) {
	t.Parallel()
	s, err := GLScript(db.Queries(), 3, `{"x":1}`)
	require.NoError(t, err)
	assert.Equal(t, 3, s.Events)
	assert.Equal(t, "gl-batch-3", s.Name)
	assert.Equal(t, 1, strings.Count(s.Text, "BEGIN;"), "one transaction per batch")
	assert.Equal(t, 1, strings.Count(s.Text, "COMMIT;"))
	// processBatchTx's claim (written processed), the posting rules' lock and read, PostBatch's
	// two inserts, the acknowledgments' insert (publish on commit): once each, in this order,
	// between BEGIN and COMMIT.
	last := strings.Index(s.Text, "BEGIN;")
	for _, q := range []struct{ set, name string }{
		{"events", "ClaimInboxBatch"},
		{"gl", "LockPostingRulesShared"},
		{"gl", "ListPostingRules"},
		{"gl", "InsertEntriesBatch"},
		{"gl", "InsertLinesBatch"},
		{"events", "InsertOutboxBatchClaimed"},
	} {
		at := assertVerbatim(t, s.Text, q.set, q.name)
		assert.Greater(t, at, last, "%s comes after the statement before it", q.name)
		last = at
	}
	assert.Greater(t, strings.Index(s.Text, "COMMIT;"), last)
	for _, table := range []string{"inbox", "journal_entries", "journal_lines", "outbox"} {
		stmt := "INSERT " + database.FixedPlan + " INTO " + table // the services' SQL, prepared
		assert.Equal(t, 1, strings.Count(s.Text, stmt), "one statement for the whole batch: %s", stmt)
	}
	assert.Contains(t, s.Text, "ARRAY['"+contract.TypeTransferPostedV2+"']", "one acknowledgment for the whole batch")
	// The per-event statements of before are gone: a single-row claim, GetEntryByTransfer,
	// the unclaimed outbox insert.
	for _, old := range []string{"VALUES (", "SELECT * FROM journal_entries WHERE transfer_id", "-- InsertOutbox (", "-- ClaimInbox ("} {
		assert.NotContains(t, s.Text, old)
	}
	// Every array has the batch's events (lines: two per event), derived from one random base.
	assert.Contains(t, s.Text, "\\set b random(0, 333333333333333332) * 3\n")
	assert.Contains(t, s.Text, "FROM generate_series(:b::bigint + 1, :b::bigint + 3) AS g ORDER BY g")
	assert.Contains(t, s.Text, "FROM generate_series(:b::bigint + 1, :b::bigint + 3) AS g, generate_series(1, 2) AS k ORDER BY g, k")
	assert.Contains(t, s.Text, "('pgbench')::text, clock_timestamp() + make_interval(secs => (30)::float8)", "the acknowledgments are written claimed")
	assert.NotContains(t, s.Text, "@", "no sqlc parameter is left")
	_, err = GLScript(db.Queries(), 0, `{}`)
	assert.Error(t, err)
}

func TestRelayScriptClaimsAndMarksARound(t *testing.T) {
	t.Parallel()
	s, err := RelayScript(db.Queries(), 100)
	require.NoError(t, err)
	assert.Equal(t, 100, s.Events)
	assert.Equal(t, "rows", s.Unit)
	claim := assertVerbatim(t, s.Text, "events", "ClaimOutbox")
	mark := assertVerbatim(t, s.Text, "events", "MarkDispatched")
	assert.Less(t, claim, mark, "the claim, then the mark")
	gset := strings.Index(s.Text, "\n\\gset\n")
	assert.True(t, claim < gset && gset < mark, "the claim's ids reach the mark through \\gset")
	assert.Contains(t, s.Text, "LIMIT (100)")
	assert.Contains(t, s.Text, "unnest((:ids)::uuid[]) AS id")
	assert.Equal(t, 3, strings.Count(s.Text, "('"+relayOwner+"')::text"), "one lease owner for the claim and the mark (its lock and its update)")
	assert.NotContains(t, s.Text, "BEGIN;", "each statement is its own transaction, as in the relay")
	assert.NotContains(t, s.Text, "@")
}

// TestScriptsRunInPostgres runs each generated script twice with pgbench against its own scratch
// database migrated like the service's, and checks what the two transactions wrote.
func TestScriptsRunInPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs pgbench against PostgreSQL")
	}
	bin, err := exec.LookPath("pgbench")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgbench is required under CI=true: %v", err)
		}
		t.Skipf("pgbench not found: %v", err)
	}
	run := func(t *testing.T, s Script, service, protocol string, users int, prepare func(*pgxpool.Pool)) *pgxpool.Pool {
		t.Helper()
		ctx := context.Background()
		url := envtest.DatabaseURL(t)
		require.NoError(t, scratchDatabase(ctx, url, service, users))
		pool, err := database.Open(ctx, url, 2)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		if prepare != nil {
			prepare(pool)
		}
		path := filepath.Join(t.TempDir(), s.Name+".pgbench.sql")
		require.NoError(t, os.WriteFile(path, []byte(s.Text), 0o644))
		out, err := exec.CommandContext(ctx, bin, pgbenchArgs(s, path, url, protocol, 1, "-t", "2")...).CombinedOutput()
		require.NoError(t, err, "pgbench:\n%s", out)
		_, _, processed, failed, err := ParsePgbench(string(out))
		require.NoError(t, err, "pgbench:\n%s", out)
		require.Equal(t, int64(2), processed, "pgbench:\n%s", out)
		require.Zero(t, failed)
		return pool
	}
	count := func(t *testing.T, pool *pgxpool.Pool, query string) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), query).Scan(&n), query)
		return n
	}
	t.Run("wallet", func(t *testing.T) {
		t.Parallel()
		s, err := WalletScript(db.Queries(), 3, sampleTransferCompleted())
		require.NoError(t, err)
		for _, protocol := range []string{ProtocolPrepared, ProtocolUnnamed} { // the limit, and as the services send it
			pool := run(t, s, "wallet", protocol, 3, nil)
			assert.Equal(t, 2, count(t, pool, "SELECT count(*) FROM transfers"), protocol)
			assert.Equal(t, 2, count(t, pool, "SELECT count(*) FROM outbox WHERE status = 'dispatching'"), "%s: written claimed, as publish on commit writes them", protocol)
			assert.Equal(t, 0, count(t, pool, "SELECT sum(balance)::int FROM wallets"), "%s: money only moved", protocol)
		}
	})
	t.Run("gl", func(t *testing.T) {
		t.Parallel()
		const batch = 5
		s, err := GLScript(db.Queries(), batch, sampleAcknowledgment(batch))
		require.NoError(t, err)
		pool := run(t, s, "gl", ProtocolPrepared, 0, nil)
		assert.Equal(t, 2*batch, count(t, pool, "SELECT count(*) FROM inbox WHERE status = 'processed' AND consumer = 'gl'"))
		assert.Equal(t, 2*batch, count(t, pool, "SELECT count(*) FROM journal_entries"))
		assert.Equal(t, 4*batch, count(t, pool, "SELECT count(*) FROM journal_lines"))
		assert.Equal(t, 2, count(t, pool, "SELECT count(*) FROM outbox WHERE status = 'dispatching' AND lease_owner = 'pgbench' AND event_type = 'TransferPosted.v2'"),
			"one acknowledgment per batch")
		assert.Equal(t, 2*batch, count(t, pool, "SELECT count(*) FROM journal_entries e JOIN inbox i ON i.event_id = e.event_id"), "entry and inbox row belong together")
		assert.Equal(t, 2, count(t, pool, "SELECT count(*) FROM journal_entries e JOIN outbox o ON o.aggregate_id = e.transfer_id"),
			"each acknowledgment's aggregate is its batch's first transfer")
		assert.Equal(t, 2*batch, count(t, pool, "SELECT sum(jsonb_array_length(payload->'data'->'postings'))::int FROM outbox"), "the payload is a batch's")
	})
	t.Run("relay", func(t *testing.T) {
		t.Parallel()
		s, err := RelayScript(db.Queries(), RelayBatch)
		require.NoError(t, err)
		pool := run(t, s, "wallet", ProtocolPrepared, 0, func(pool *pgxpool.Pool) {
			require.NoError(t, fillOutbox(context.Background(), pool, 2*RelayBatch+50, sampleTransferCompleted()))
		})
		assert.Equal(t, 2*RelayBatch, count(t, pool, "SELECT count(*) FROM outbox WHERE status = 'dispatched' AND publish_count = 1 AND attempts = 1 AND lease_owner IS NULL AND stream_seq > 0"))
		assert.Equal(t, 50, count(t, pool, "SELECT count(*) FROM outbox WHERE status = 'pending'"))
		assert.Equal(t, 2*RelayBatch, count(t, pool, "SELECT count(*) FROM outbox WHERE status = 'dispatched' AND id < (SELECT id FROM outbox WHERE status = 'pending' ORDER BY id LIMIT 1)"), "claimed in id order")
	})
}

func TestParsePgbench(t *testing.T) {
	t.Parallel()
	out := `pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: /tmp/wallet.pgbench.sql
number of transactions actually processed: 12000
number of failed transactions: 3 (0.025%)
latency average = 2.101 ms
initial connection time = 12.345 ms
tps = 7612.345678 (without initial connection time)
`
	tps, lat, n, failed, err := ParsePgbench(out)
	require.NoError(t, err)
	assert.InDelta(t, 7612.345678, tps, 1e-9)
	assert.InDelta(t, 2.101, lat, 1e-9)
	assert.Equal(t, int64(12000), n)
	assert.Equal(t, int64(3), failed)
	_, _, _, _, err = ParsePgbench("pgbench: error: connection refused")
	assert.Error(t, err)
}
