package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/cli/clitest"
	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/outbox"
)

// runGL runs the gl program as main would, with env as its whole environment.
func runGL(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

func glEnv(dbURL string) map[string]string {
	return map[string]string{"GL_DATABASE_URL": dbURL, "LOG_FORMAT": "json"}
}

func TestAccountsCommands(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)

	out, _, err := runGL(t, env, "accounts", "add", "4010", "--name", "Fee revenue", "--type", "revenue")
	require.NoError(t, err)
	require.Equal(t, "added account 4010 (Fee revenue, revenue, normal balance credit)\n", out)

	out, _, err = runGL(t, env, "accounts", "add", "--type", "expense", "--name", "Bank fees", "--json", "5010")
	require.NoError(t, err, "the code may follow the flags")
	require.JSONEq(t, `{"code":"5010","name":"Bank fees","type":"expense","normal_balance":"debit"}`, out)

	out, _, err = runGL(t, env, "accounts", "list")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6)
	require.Regexp(t, `^CODE\s+NAME\s+TYPE\s+NORMAL BALANCE$`, lines[0])
	require.Regexp(t, `^2020\s+Funds on hold for wallets\s+liability\s+credit$`, lines[3])
	require.Regexp(t, `^4010\s+Fee revenue\s+revenue\s+credit$`, lines[4])
	require.Regexp(t, `^5010\s+Bank fees\s+expense\s+debit$`, lines[5])

	out, _, err = runGL(t, env, "accounts", "list", "--json")
	require.NoError(t, err)
	var listed struct {
		Accounts []struct{ Code, NormalBalance string } `json:"accounts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed.Accounts, 5)

	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"a code already in the chart is refused", []string{"accounts", "add", "4010", "--name", "Again", "--type", "revenue"}, "account-exists"},
		{"an unknown type is refused", []string{"accounts", "add", "4020", "--name", "Cash", "--type", "cash"}, "invalid-account"},
		{"a missing name is refused", []string{"accounts", "add", "4020", "--type", "revenue"}, "needs a name"},
		{"a missing code is refused", []string{"accounts", "add", "--name", "X", "--type", "revenue"}, "code is missing"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runGL(t, env, tt.args...)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()

	t.Run("a healthy ledger passes every check", func(t *testing.T) {
		t.Parallel()
		pool, dbURL := envtest.MigratedPool(t, "gl")
		postConsistently(t, pool, "ev-1", "tr-1", 100)
		postConsistently(t, pool, "ev-2", "tr-2", 5)
		out, _, err := runGL(t, glEnv(dbURL), "verify")
		require.NoError(t, err)
		require.Equal(t, 13, strings.Count(out, "  PASS  "), out)
		require.Contains(t, out, "every entry balances (debits = credits in each currency, lines in the entry's currency unless it is XXX, two lines or more): 2 checked, 0 failing")
		require.True(t, strings.HasSuffix(out, "verdict: PASS, all 13 checks hold\n"), out)
	})

	t.Run("an entry older than the inbox retention needs no inbox row, a younger one does", func(t *testing.T) {
		t.Parallel()
		pool, dbURL := envtest.MigratedPool(t, "gl")
		ctx := context.Background()
		postConsistently(t, pool, "ev-old", "tr-old", 100)
		// The retention deleted the old event's row; its entry was posted ten days ago.
		_, err := pool.Exec(ctx, `BEGIN;
			SET LOCAL session_replication_role = replica;
			DELETE FROM inbox WHERE id = 'gl:ev-old';
			UPDATE journal_entries SET posted_at = now() - interval '10 days' WHERE event_id = 'ev-old';
			UPDATE journal_lines SET posted_at = now() - interval '10 days'
			WHERE entry_id = (SELECT id FROM journal_entries WHERE event_id = 'ev-old');
			COMMIT;`)
		require.NoError(t, err)
		out, _, err := runGL(t, glEnv(dbURL), "verify")
		require.NoError(t, err, out)
		env := glEnv(dbURL)
		env["EVENTS_INBOX_RETENTION"] = "720h" // thirty days: the row should still be there
		env["EVENTS_STREAM_MAX_AGE"] = "168h"
		out, _, err = runGL(t, env, "verify")
		require.ErrorContains(t, err, "1 of 13 checks failed", out)
	})

	t.Run("every broken invariant is reported with its ids and fails the command", func(t *testing.T) {
		t.Parallel()
		pool, dbURL := envtest.MigratedPool(t, "gl")
		ctx := context.Background()
		postConsistently(t, pool, "ev-ok", "tr-ok", 100)
		// An inbox row that says processed, with no entry.
		_, err := pool.Exec(ctx, `INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, processed_at)
			VALUES ('gl:ev-lost', 'gl', 'ev-lost', 'TransferCompleted.v1', 'processed', 9, now())`)
		require.NoError(t, err)
		// An entry written around the consumer, and an unbalanced one by a superuser who
		// switched the triggers off: what the database guards cannot stop, verify must see.
		_, err = pool.Exec(ctx, `BEGIN;
			SET LOCAL session_replication_role = replica;
			INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			VALUES ('00000000-0000-7000-8000-0000000000aa', 'ev-bad', 'tr-bad', 'USD', now());
			INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
			    ('00000000-0000-7000-8000-0000000000aa', '1010', 'debit', 7, 'USD', 'w-1'),
			    ('00000000-0000-7000-8000-0000000000aa', '2010', 'credit', 5, 'USD', 'w-1');
			COMMIT;`)
		require.NoError(t, err)

		out, _, err := runGL(t, glEnv(dbURL), "verify")
		require.ErrorContains(t, err, "5 of 13 checks failed")
		require.Contains(t, out, "FAIL  every entry balances (debits = credits in each currency, lines in the entry's currency unless it is XXX, two lines or more): 2 checked, 1 failing\n        00000000-0000-7000-8000-0000000000aa\n")
		require.Contains(t, out, "FAIL  the trial balance nets to zero in every currency: 1 checked, 1 failing\n        USD (debits 107, credits 105)\n")
		require.Contains(t, out, "FAIL  every processed TransferCompleted (v1, v2), TransferReversed.v1, TransferBatch*.v1 and Hold*.v1 in the inbox has its entry: 2 checked, 1 failing\n        gl:ev-lost\n")
		require.Contains(t, out, "FAIL  every entry posted in the last 172h48m0s (nine tenths of EVENTS_INBOX_RETENTION) has its processed inbox row (gl:<event id>): 2 checked, 1 failing\n        00000000-0000-7000-8000-0000000000aa\n")
		require.Contains(t, out, "FAIL  every entry's lines are those of the posting rule in force for its event type, kind and time: 2 checked, 1 failing\n        00000000-0000-7000-8000-0000000000aa\n")
		require.True(t, strings.HasSuffix(out, "verdict: FAIL, 5 of 13 checks failed\n"), out)

		out, _, err = runGL(t, glEnv(dbURL), "verify", "--json")
		require.Error(t, err)
		report := clitest.Verification(t, out)
		require.False(t, report.OK)
		require.Len(t, report.Checks, 13)
		require.Equal(t, cli.Check{Name: "every processed TransferCompleted (v1, v2), TransferReversed.v1, TransferBatch*.v1 and Hold*.v1 in the inbox has its entry", OK: false,
			Checked: 2, Failed: 1, Sample: []string{"gl:ev-lost"}, Detail: "2 checked, 1 failing"}, report.Checks[2])
	})

	t.Run("a hold's release without its placement takes account 2020 below zero and apart from the open holds", func(t *testing.T) {
		t.Parallel()
		pool, dbURL := envtest.MigratedPool(t, "gl")
		postConsistently(t, pool, "ev-1", "tr-1", 100)
		// A balanced release written around the consumer, with its processed inbox row: only
		// the hold checks can see it.
		_, err := pool.Exec(context.Background(), `BEGIN;
			INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, processed_at)
			VALUES ('gl:ev-rel', 'gl', 'ev-rel', 'HoldVoided.v1', 'processed', 2, now());
			INSERT INTO journal_entries (id, event_id, transfer_id, hold_id, currency, occurred_at, event_type, kind)
			VALUES ('00000000-0000-7000-8000-0000000000cc', 'ev-rel', 'hold:h-1:released', 'h-1', 'USD', now(), 'HoldVoided.v1', 'hold');
			INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
			    ('00000000-0000-7000-8000-0000000000cc', '2020', 'debit', 50, 'USD', 'w-1'),
			    ('00000000-0000-7000-8000-0000000000cc', '2010', 'credit', 50, 'USD', 'w-1');
			COMMIT;`)
		require.NoError(t, err)
		out, _, err := runGL(t, glEnv(dbURL), "verify")
		require.ErrorContains(t, err, "3 of 13 checks failed", out)
		require.Contains(t, out, "FAIL  every hold's release has its placement, in its currency and amount: 1 checked, 1 failing\n        00000000-0000-7000-8000-0000000000cc\n")
		require.Contains(t, out, "FAIL  account 2020 (funds on hold) never went negative in any currency: 1 checked, 1 failing\n        USD (lowest -50)\n")
		require.Contains(t, out, "FAIL  account 2020's balance equals the open holds' total in every currency: 1 checked, 1 failing\n        USD (balance -50, open holds 0)\n")
	})

	t.Run("totals beyond int64 still get a verdict, and a pass when the entries balance", func(t *testing.T) {
		t.Parallel()
		pool, dbURL := envtest.MigratedPool(t, "gl")
		const near = 1 << 62
		postConsistently(t, pool, "ev-1", "tr-1", near+1)
		postConsistently(t, pool, "ev-2", "tr-2", near+3) // 1010 and 2010 now hold 2^63+4
		out, _, err := runGL(t, glEnv(dbURL), "verify")
		require.NoError(t, err, out)
		require.True(t, strings.HasSuffix(out, "verdict: PASS, all 13 checks hold\n"), out)
		out, _, err = runGL(t, glEnv(dbURL), "verify", "--json")
		require.NoError(t, err, out)
		require.True(t, clitest.Verification(t, out).OK)
	})

	t.Run("an unbalanced ledger beyond int64 fails with its exact totals", func(t *testing.T) {
		t.Parallel()
		pool, dbURL := envtest.MigratedPool(t, "gl")
		postConsistently(t, pool, "ev-1", "tr-1", 1<<62+1)
		// With the triggers off, an entry of a debit of 2^62+1 and a credit of 2^62: the ledger's
		// debits reach 2^63+2, its credits 2^63+1.
		_, err := pool.Exec(context.Background(), `BEGIN;
			SET LOCAL session_replication_role = replica;
			INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, processed_at)
			VALUES ('gl:ev-bad', 'gl', 'ev-bad', 'TransferCompleted.v1', 'processed', 2, now());
			INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
			VALUES ('00000000-0000-7000-8000-0000000000bb', 'ev-bad', 'tr-bad', 'USD', now());
			INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id) VALUES
			    ('00000000-0000-7000-8000-0000000000bb', '1010', 'debit', 4611686018427387905, 'USD', 'w-1'),
			    ('00000000-0000-7000-8000-0000000000bb', '2010', 'credit', 4611686018427387904, 'USD', 'w-1');
			COMMIT;`)
		require.NoError(t, err)
		out, _, err := runGL(t, glEnv(dbURL), "verify")
		require.ErrorContains(t, err, "3 of 13 checks failed")
		require.Contains(t, out, "FAIL  every entry balances (debits = credits in each currency, lines in the entry's currency unless it is XXX, two lines or more): 2 checked, 1 failing\n        00000000-0000-7000-8000-0000000000bb\n")
		require.Contains(t, out, "FAIL  the trial balance nets to zero in every currency: 1 checked, 1 failing\n        USD (debits 9223372036854775810, credits 9223372036854775809)\n")
		require.True(t, strings.HasSuffix(out, "verdict: FAIL, 3 of 13 checks failed\n"), out)
	})

	t.Run("a database that does not exist is an error, not an empty pass", func(t *testing.T) {
		t.Parallel()
		dbURL := strings.Replace(envtest.ServerURL(t), "/postgres?", "/gl_no_such_database?", 1)
		_, _, err := runGL(t, glEnv(dbURL), "verify")
		require.ErrorContains(t, err, "gl_no_such_database")
	})
}

// postConsistently writes an entry with its processed inbox row in one transaction, as the
// consumer does: a deposit from wallet bank to wallet alice.
func postConsistently(t *testing.T, pool *pgxpool.Pool, eventID, transferID string, amount int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO inbox (id, consumer, event_id, event_type, status, stream_seq, processed_at)
		VALUES ('gl:' || $1::text, 'gl', $1::text, 'TransferCompleted.v1', 'processed', 1, now())`, eventID)
	require.NoError(t, err)
	var id string
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO journal_entries (id, event_id, transfer_id, currency, occurred_at)
		VALUES (gen_random_uuid(), $1, $2, 'USD', now()) RETURNING id::text`, eventID, transferID).Scan(&id))
	_, err = tx.Exec(ctx, `INSERT INTO journal_lines (entry_id, account_code, direction, amount, currency, wallet_id)
		VALUES ($1::uuid, '1010', 'debit', $2, 'USD', 'bank'), ($1::uuid, '2010', 'credit', $2, 'USD', 'alice')`, id, amount)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
}

// acknowledgment writes a TransferPosted.v1 to the GL's outbox as the poster does, pending.
func acknowledgment(t *testing.T, pool *pgxpool.Pool, transferID string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	_, err := outbox.New(contract.SourceGL).Add(context.Background(), pool, outbox.Event{
		ID: id, Type: contract.TypeTransferPosted, AggregateID: transferID, Time: time.Now().UTC(),
		Data: contract.TransferPosted{TransferID: transferID, SourceEventID: uuid.NewString(), EntryID: uuid.NewString(), PostedAt: time.Now().UTC()},
	})
	require.NoError(t, err)
	return id
}

func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	env := glEnv(dbURL)
	ctx := context.Background()
	pending := acknowledgment(t, pool, "tr-pending")
	dead := acknowledgment(t, pool, "tr-dead")
	for _, sql := range []string{
		`UPDATE outbox SET status = 'dispatching', attempts = 1, lease_owner = 'relay-1', lease_until = now() + interval '30 seconds' WHERE id = $1`,
		`UPDATE outbox SET status = 'dead_letter', lease_owner = NULL, lease_until = NULL, last_error = 'nats: maximum payload exceeded' WHERE id = $1`,
	} {
		_, err := pool.Exec(ctx, sql, dead)
		require.NoError(t, err)
	}

	out, _, err := runGL(t, env, "outbox", "stats")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^pending\s+1$`, out)
	require.Regexp(t, `(?m)^dead_letter\s+1$`, out)
	require.Contains(t, out, "oldest unacknowledged:")

	out, _, err = runGL(t, env, "outbox", "list", "--status", "dead_letter")
	require.NoError(t, err)
	require.Regexp(t, dead.String()+`\s+dead_letter\s+tr-dead\s+1\s+.*nats: maximum payload exceeded`, out)
	require.NotContains(t, out, pending.String())

	out, _, err = runGL(t, env, "outbox", "show", dead.String())
	require.NoError(t, err)
	require.Regexp(t, `(?m)^status\s+dead_letter$`, out)
	require.Contains(t, out, `"type": "TransferPosted.v1"`)

	out, _, err = runGL(t, env, "outbox", "requeue", dead.String(), pending.String(), "--json")
	require.ErrorContains(t, err, "outbox requeue: 1 of the ids were not requeued")
	require.JSONEq(t, `{"requeued":["`+dead.String()+`"],"refused":[{"id":"`+pending.String()+`","status":"pending"}]}`, out)

	// The requeue is in the audit trail, as done by this operator's command.
	out, _, err = runGL(t, env, "audit", "list", "--json")
	require.NoError(t, err)
	var trail []struct {
		Actor, Action, Target string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &trail))
	require.NotEmpty(t, trail)
	last := trail[len(trail)-1]
	require.Equal(t, "outbox.requeue", last.Action)
	require.True(t, strings.HasPrefix(last.Actor, "cli:"), last.Actor)

	out, _, err = runGL(t, env, "outbox", "stats", "--json")
	require.NoError(t, err)
	var stats struct {
		Counts map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &stats))
	require.Equal(t, map[string]int64{"pending": 2, "dispatching": 0, "dispatched": 0, "acknowledged": 0, "failed": 0, "dead_letter": 0}, stats.Counts)
}

func TestEveryCommandAnswersHelp(t *testing.T) {
	t.Parallel()
	commands := clitest.EveryCommandHelps(t, run)
	require.Equal(t, []string{
		"serve", "migrate", "accounts list", "accounts add", "rules list", "rules set", "rules withdraw", "replay", "reconcile", "verify", "status",
		"outbox stats", "outbox list", "outbox show", "outbox requeue",
		"inbox stats", "inbox list", "inbox retry", "inbox abandon", "inbox resolve",
		"keys create", "keys list", "keys revoke", "events keygen", "events setup", "audit list",
	}, commands)
}

func TestCommandsNeverCreateADatabase(t *testing.T) {
	t.Parallel()
	dbURL := strings.Replace(envtest.ServerURL(t), "/postgres?", "/gl_no_such_database?", 1)
	for _, args := range [][]string{{"accounts", "list"}, {"accounts", "add", "4010", "--name", "Fees", "--type", "revenue"}, {"outbox", "stats"}, {"inbox", "list"}} {
		_, _, err := runGL(t, glEnv(dbURL), args...)
		require.ErrorContains(t, err, `database "gl_no_such_database" does not exist`, args)
	}
}

// The GL signs its events with its own key and accepts the wallet's alone.
func TestServeNeedsEventKeys(t *testing.T) {
	t.Parallel()
	clitest.SignedEvents(t, run, contract.SourceGL, contract.SourceWallet, glEnv(envtest.DatabaseURL(t)))
}

// The GL runs as its own least-privileged NATS user once the operator set the topology up.
func TestBrokerUsers(t *testing.T) {
	t.Parallel()
	clitest.BrokerUsers(t, run, contract.SourceGL, glEnv(envtest.DatabaseURL(t)))
}

func TestCheckpointSettingsOutOfRangeAreRefused(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	for setting, want := range map[string]string{
		"GL_CHECKPOINT_LINES=0":        "GL_CHECKPOINT_LINES 0: want 1 to 1000000",
		"GL_CHECKPOINT_LINES=2000000":  "GL_CHECKPOINT_LINES 2000000: want 1 to 1000000",
		"GL_CHECKPOINT_INTERVAL=500ms": "GL_CHECKPOINT_INTERVAL 500ms: want 1s to 1h",
		"GL_CHECKPOINT_LINES=some":     "GL_CHECKPOINT_LINES",
		"GL_CHECKPOINT_RETENTION=2s":   "GL_CHECKPOINT_RETENTION 2s: want 0 (keep every checkpoint) or at least GL_CHECKPOINT_INTERVAL (5s)",
		"GL_CHECKPOINT_RETENTION=-1h":  "GL_CHECKPOINT_RETENTION -1h0m0s: want 0 (keep every checkpoint) or at least GL_CHECKPOINT_INTERVAL (5s)",
	} {
		env := glEnv(dbURL)
		k, v, _ := strings.Cut(setting, "=")
		env[k] = v
		_, _, err := runGL(t, env, "accounts", "list")
		require.ErrorContains(t, err, want, setting)
	}
	env := glEnv(dbURL)
	env["GL_CHECKPOINT_LINES"] = "1"
	env["GL_CHECKPOINT_RETENTION"] = "0"
	_, _, err := runGL(t, env, "accounts", "list")
	require.NoError(t, err, "one line is in range, and a retention of 0 keeps every checkpoint")
}

func TestReadSettingsOutOfRangeAreRefused(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	for setting, want := range map[string]string{
		"GL_READ_MAX_STALENESS=100ms": "GL_READ_MAX_STALENESS 100ms: want 500ms to 1h",
		"GL_READ_MAX_STALENESS=2h":    "GL_READ_MAX_STALENESS 2h0m0s: want 500ms to 1h",
		"GL_READ_DATABASE_URL=postgres://replica-a,replica-b/other?target_session_attrs=prefer-standby": `GL_READ_DATABASE_URL: names database "other"`,
		"GL_READ_DATABASE_URL=postgres://%zz": "GL_READ_DATABASE_URL: parse database url",
	} {
		env := glEnv(dbURL)
		k, v, _ := strings.Cut(setting, "=")
		env[k] = v
		_, _, err := runGL(t, env, "accounts", "list")
		require.ErrorContains(t, err, want, setting)
	}
	env := glEnv(dbURL)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.Host = "replica-a:5432," + u.Host
	q := u.Query()
	q.Set("target_session_attrs", "prefer-standby")
	u.RawQuery = q.Encode()
	env["GL_READ_DATABASE_URL"] = u.String()
	_, _, err = runGL(t, env, "accounts", "list")
	require.NoError(t, err, "a multi-host read URL of the same database is accepted")
}
