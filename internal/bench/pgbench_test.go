package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"walletgl/db"
)

func TestParseQueriesReadsTheRealFiles(t *testing.T) {
	t.Parallel()
	qs, err := ParseQueries(db.Queries(), "wallet")
	require.NoError(t, err)
	q, ok := qs["LockWallets"]
	require.True(t, ok, "LockWallets is in db/queries/wallet")
	assert.Equal(t, "wallet/wallets.sql", q.File)
	assert.True(t, strings.HasPrefix(q.SQL, "SELECT id, currency, balance, allow_negative"), "comments are dropped: %q", q.SQL)
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
		"INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)",
		"ON CONFLICT (idempotency_key) DO NOTHING",
		"FOR NO KEY UPDATE;",
		"UPDATE wallets w",
		"INSERT INTO outbox (id, event_type, aggregate_id, payload)",
		"(:payload)",
		"COMMIT;",
	} {
		assert.Contains(t, s.Text, want)
	}
	assert.NotContains(t, s.Text, "@", "no sqlc parameter is left")
	assert.Less(t, strings.Index(s.Text, "INSERT INTO transfers"), strings.Index(s.Text, "INSERT INTO outbox"), "statements in the store's order")
}

func TestGLScriptBatchesThePostingStatements(t *testing.T) {
	t.Parallel()
	s, err := GLScript(db.Queries(), 3, `{"x":1}`)
	require.NoError(t, err)
	assert.Equal(t, 3, s.Events)
	assert.Equal(t, 1, strings.Count(s.Text, "BEGIN;"), "one transaction per batch")
	assert.Equal(t, 1, strings.Count(s.Text, "COMMIT;"))
	for _, stmt := range []string{
		"INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq)",
		"INSERT INTO journal_entries",
		"INSERT INTO journal_lines",
		"SELECT * FROM journal_entries WHERE transfer_id",
		"INSERT INTO outbox (id, event_type, aggregate_id, payload)",
		"SET status = 'processed'",
	} {
		assert.Equal(t, 3, strings.Count(s.Text, stmt), "once per event: %s", stmt)
	}
	assert.Contains(t, s.Text, "\\set n3 random(")
	assert.NotContains(t, s.Text, "@")
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
