package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/cli"
	"walletgl/internal/cli/clitest"
	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

type testBundle struct {
	pool      *pgxpool.Pool
	env       map[string]string
	transfers []wallet.Transfer
}

// setup gives the test a wallet database holding a funding wallet, two customers and three
// transfers between them, each with its pending outbox row.
func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, dbURL := envtest.MigratedPool(t, "wallet")
	ctx := context.Background()
	store := postgres.NewStore(pool, postgres.Options{})
	for _, w := range []wallet.Wallet{{ID: "bank", Currency: "USD", AllowNegative: true}, {ID: "alice", Currency: "USD"}, {ID: "bob", Currency: "USD"}} {
		_, err := store.CreateWallet(ctx, w)
		require.NoError(t, err)
	}
	b := &testBundle{pool: pool, env: map[string]string{"WALLET_DATABASE_URL": dbURL, "LOG_FORMAT": "json"}}
	for i, req := range []wallet.TransferRequest{
		{IdempotencyKey: "fund-alice", FromWalletID: "bank", ToWalletID: "alice", Amount: 10000, Currency: "USD"},
		{IdempotencyKey: "pay-bob", FromWalletID: "alice", ToWalletID: "bob", Amount: 2550, Currency: "USD"},
		{IdempotencyKey: "refund-alice", FromWalletID: "bob", ToWalletID: "alice", Amount: 50, Currency: "USD"},
	} {
		tr, _, err := store.CreateTransfer(ctx, req)
		require.NoError(t, err, i)
		b.transfers = append(b.transfers, tr)
	}
	return b
}

// run runs the wallet command with args and the bundle's environment.
func (b *testBundle) run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, func(k string) string { return b.env[k] }, &out, &errOut)
	return out.String(), errOut.String(), err
}

// setStatus moves the outbox row of transfer i along the lifecycle to status.
func (b *testBundle) setStatus(t *testing.T, i int, status string) uuid.UUID {
	t.Helper()
	id := b.transfers[i].EventID
	steps := map[string][]string{
		"dispatched":  {"dispatching", "dispatched"},
		"failed":      {"dispatching", "failed"},
		"dead_letter": {"dispatching", "dead_letter"},
	}[status]
	for _, s := range steps {
		_, err := b.pool.Exec(context.Background(), `
			UPDATE outbox SET status = $2, attempts = attempts + 1,
			       lease_owner = CASE WHEN $2 = 'dispatching' THEN 'relay-1' END,
			       lease_until = CASE WHEN $2 = 'dispatching' THEN now() + interval '30 seconds' END,
			       dispatched_at = CASE WHEN $2 = 'dispatched' THEN now() ELSE dispatched_at END,
			       last_error = CASE WHEN $2 IN ('failed', 'dead_letter') THEN 'nats: no responders' END
			WHERE id = $1`, id, s)
		require.NoError(t, err)
	}
	return id
}

func (b *testBundle) status(t *testing.T, id uuid.UUID) string {
	t.Helper()
	var s string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT status FROM outbox WHERE id = $1`, id).Scan(&s))
	return s
}

func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dead := b.setStatus(t, 0, "dead_letter")
	failed := b.setStatus(t, 1, "failed")
	pending := b.transfers[2].EventID

	t.Run("stats counts every status and dates the oldest", func(t *testing.T) {
		out, _, err := b.run(t, "outbox", "stats")
		require.NoError(t, err)
		require.Regexp(t, `(?m)^pending\s+1$`, out)
		require.Regexp(t, `(?m)^dead_letter\s+1$`, out)
		require.Regexp(t, `(?m)^acknowledged\s+0$`, out)
		require.Contains(t, out, "oldest pending:")

		out, _, err = b.run(t, "outbox", "stats", "--json")
		require.NoError(t, err)
		var stats struct {
			Counts map[string]int64 `json:"counts"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &stats))
		require.Equal(t, map[string]int64{"pending": 1, "dispatching": 0, "dispatched": 0, "acknowledged": 0, "failed": 1, "dead_letter": 1}, stats.Counts)
	})
	t.Run("list shows the rows of a status", func(t *testing.T) {
		out, _, err := b.run(t, "outbox", "list", "--status", "dead_letter", "--limit", "5")
		require.NoError(t, err)
		require.Contains(t, out, dead.String())
		require.Contains(t, out, "nats: no responders")
		require.NotContains(t, out, failed.String())

		_, _, err = b.run(t, "outbox", "list")
		require.ErrorContains(t, err, "--status is required")
		_, _, err = b.run(t, "outbox", "list", "--status", "lost")
		require.ErrorContains(t, err, "invalid status")
	})
	t.Run("show prints one row and its payload", func(t *testing.T) {
		out, _, err := b.run(t, "outbox", "show", failed.String())
		require.NoError(t, err)
		require.Regexp(t, `(?m)^status\s+failed$`, out)
		require.Contains(t, out, `"type": "TransferCompleted.v2"`)
		require.Contains(t, out, `"kind": "transfer"`)

		_, _, err = b.run(t, "outbox", "show", uuid.NewString())
		require.ErrorContains(t, err, "not found")
	})
	t.Run("requeue by id moves a dead letter and refuses a pending row", func(t *testing.T) {
		out, _, err := b.run(t, "outbox", "requeue", dead.String(), pending.String())
		require.ErrorContains(t, err, "1 of the ids were not requeued")
		require.Contains(t, out, "requeued "+dead.String())
		require.Contains(t, out, "refused  "+pending.String()+": it is pending")
		require.Equal(t, "pending", b.status(t, dead))
	})
	t.Run("requeue by status moves every row of it", func(t *testing.T) {
		out, _, err := b.run(t, "outbox", "requeue", "--status", "failed", "--json")
		require.NoError(t, err)
		require.JSONEq(t, fmt.Sprintf(`{"requeued":[%q]}`, failed), out)
		require.Equal(t, "pending", b.status(t, failed))

		_, _, err = b.run(t, "outbox", "requeue", "--status", "acknowledged")
		require.ErrorContains(t, err, "invalid status")
		_, _, err = b.run(t, "outbox", "requeue")
		require.ErrorContains(t, err, "give outbox row ids")
	})
}

func TestOutboxReconcileAsksTheGLOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	posted := b.setStatus(t, 0, "dispatched")   // the GL has it; its acknowledgment was lost
	unposted := b.setStatus(t, 1, "dispatched") // the GL has not seen it
	deadPosted := b.setStatus(t, 2, "dead_letter")

	// The GL's API as it documents GET /v1/entries?transfer_id= (the wallet's tests import
	// nothing of the GL; the real API is asked through the binaries in internal/e2e): it has
	// posted transfers 0 and 2.
	postedBy := map[string]string{b.transfers[0].ID.String(): "entry-0", b.transfers[2].ID.String(): "entry-2"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/entries" {
			http.NotFound(w, r)
			return
		}
		entries := []map[string]string{}
		if id, ok := postedBy[r.URL.Query().Get("transfer_id")]; ok {
			entries = append(entries, map[string]string{"id": id, "event_id": "ev-" + id})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"entries": entries})
	}))
	t.Cleanup(srv.Close)
	b.env["GL_URL"] = srv.URL

	out, _, err := b.run(t, "outbox", "reconcile", "--dry-run")
	require.NoError(t, err)
	require.Contains(t, out, "would acknowledge "+posted.String()+" (was dispatched): transfer "+b.transfers[0].ID.String()+", GL entry entry-0")
	require.Contains(t, out, "would acknowledge "+deadPosted.String()+" (was dead_letter)")
	require.NotContains(t, out, unposted.String())
	require.Contains(t, out, "checked 3 rows (dispatched, failed, dead_letter): 2 would acknowledge, 1 not posted by the GL yet")
	require.Equal(t, "dispatched", b.status(t, posted), "a dry run changes nothing")
	require.Equal(t, "dead_letter", b.status(t, deadPosted))

	out, _, err = b.run(t, "outbox", "reconcile")
	require.NoError(t, err)
	require.Contains(t, out, "acknowledged "+posted.String())
	require.Contains(t, out, "2 acknowledged, 1 not posted")
	require.Equal(t, "acknowledged", b.status(t, posted))
	require.Equal(t, "acknowledged", b.status(t, deadPosted))
	require.Equal(t, "dispatched", b.status(t, unposted))

	out, _, err = b.run(t, "outbox", "reconcile", "--json")
	require.NoError(t, err)
	require.JSONEq(t, `{"dry_run":false,"checked":1,"changed":[],"not_posted":1}`, out)

	b.env["GL_URL"] = "http://127.0.0.1:1"
	_, _, err = b.run(t, "outbox", "reconcile")
	require.ErrorContains(t, err, "ask the GL")
	require.Equal(t, "dispatched", b.status(t, unposted))
}

func TestOutboxRepublishSendsAPeriodsAcknowledgedRowsBackToPending(t *testing.T) {
	t.Parallel()
	b := setup(t) // three pending rows, created now: outside every period below
	ctx := context.Background()
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return ts
	}
	// Rows as the relay and the GL's acknowledgments left them, created at fixed times.
	row := func(status, created string) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		_, err := b.pool.Exec(ctx, `INSERT INTO outbox (id, event_type, aggregate_id, payload, status, attempts, publish_count,
				stream_seq, dispatched_at, acknowledged_at, last_error, created_at)
			VALUES ($1::uuid, 'TransferCompleted.v1', 'tr-' || $1::text, '{}', $2::text, 1, 1, 7, $3::timestamptz,
				CASE WHEN $2::text = 'acknowledged' THEN $3::timestamptz END, CASE WHEN $2::text = 'dead_letter' THEN 'refused' END, $3::timestamptz)`,
			id, status, at(created))
		require.NoError(t, err)
		return id
	}
	before := row("acknowledged", "2020-01-02T08:59:59Z")
	first := row("acknowledged", "2020-01-02T09:00:00Z")
	inside := row("acknowledged", "2020-01-02T10:30:00Z")
	atEnd := row("acknowledged", "2020-01-02T11:00:00Z")
	dispatched := row("dispatched", "2020-01-02T10:00:00Z")
	dead := row("dead_letter", "2020-01-02T10:00:00Z")
	statuses := func() map[uuid.UUID]string {
		out := map[uuid.UUID]string{}
		for _, id := range []uuid.UUID{before, first, inside, atEnd, dispatched, dead} {
			out[id] = b.status(t, id)
		}
		for _, tr := range b.transfers {
			out[tr.EventID] = b.status(t, tr.EventID)
		}
		return out
	}
	want := statuses()

	t.Run("acknowledged rows created in [since, until) go back to pending, as new, and nothing else moves", func(t *testing.T) {
		out, _, err := b.run(t, "outbox", "republish", "--since", "2020-01-02T09:00:00Z", "--until", "2020-01-02T11:00:00Z")
		require.NoError(t, err)
		require.Contains(t, out, "2 acknowledged rows created from 2020-01-02T09:00:00Z to 2020-01-02T11:00:00Z back to pending")
		require.Contains(t, out, "the rows return to acknowledged by themselves")
		require.Contains(t, out, "note: acknowledged rows are deleted after EVENTS_RETENTION", "the period is older than the retention")
		want[first], want[inside] = "pending", "pending"
		require.Equal(t, want, statuses())

		var attempts int32
		var dispatchedAt, acknowledgedAt *time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT attempts, dispatched_at, acknowledged_at FROM outbox WHERE id = $1`, inside).
			Scan(&attempts, &dispatchedAt, &acknowledgedAt))
		require.Zero(t, attempts)
		require.Nil(t, dispatchedAt, "the relay publishes it as a new row; catch-up does not take it for an old one")
		require.Nil(t, acknowledgedAt)
	})

	t.Run("without --until the period has no end; rows already pending are not counted again", func(t *testing.T) {
		out, _, err := b.run(t, "outbox", "republish", "--since", "2020-01-02T09:00:00+00:00", "--json")
		require.NoError(t, err)
		require.JSONEq(t, `{"since":"2020-01-02T09:00:00Z","requeued":1}`, out)
		want[atEnd] = "pending"
		require.Equal(t, want, statuses())
	})

	t.Run("acknowledged stays terminal for any other transaction", func(t *testing.T) {
		_, err := b.pool.Exec(ctx, `UPDATE outbox SET status = 'pending' WHERE id = $1`, before)
		require.ErrorContains(t, err, "illegal status transition acknowledged -> pending")
		_, err = b.pool.Exec(ctx, `UPDATE outbox SET status = 'dispatching', lease_owner = 'x', lease_until = now() WHERE id = $1`, before)
		require.ErrorContains(t, err, "illegal status transition acknowledged -> dispatching")
		require.Equal(t, "acknowledged", b.status(t, before))
	})

	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"a period without a start is refused", []string{}, "--since is required"},
		{"a start that is not RFC 3339 is refused", []string{"--since", "yesterday"}, `--since "yesterday" is not an RFC 3339 time`},
		{"an end that is not RFC 3339 is refused", []string{"--since", "2020-01-02T09:00:00Z", "--until", "2020-01-02"}, `--until "2020-01-02" is not an RFC 3339 time`},
		{"an end before the start is refused", []string{"--since", "2020-01-02T09:00:00Z", "--until", "2020-01-02T09:00:00Z"}, "must be after its start"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := b.run(t, append([]string{"outbox", "republish"}, tt.args...)...)
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, "acknowledged", b.status(t, before))
		})
	}
}

func TestOutboxRebuildRefusesABadRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"a period without a start is refused", []string{}, "outbox rebuild: --since is required"},
		{"a start that is not RFC 3339 is refused", []string{"--since", "yesterday"}, `--since "yesterday" is not an RFC 3339 time`},
		{"an end before the start is refused", []string{"--since", "2020-01-02T09:00:00Z", "--until", "2020-01-01T09:00:00Z"}, "must be after its start"},
		{"a batch of nothing is refused", []string{"--since", "2020-01-02T09:00:00Z", "--batch", "0"}, "--batch must be from 1 to 10000, got 0"},
		{"arguments are refused", []string{"--since", "2020-01-02T09:00:00Z", "all"}, "unexpected arguments"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := b.run(t, append([]string{"outbox", "rebuild"}, tt.args...)...)
			require.ErrorContains(t, err, tt.want)
		})
	}
	out, _, err := b.run(t, "outbox", "rebuild", "--since", "2020-01-02T09:00:00Z", "--json")
	require.NoError(t, err)
	require.Contains(t, out, `"events": `)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a consistent database passes every check", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out, _, err := b.run(t, "verify")
		require.NoError(t, err, out)
		require.Equal(t, 9, strings.Count(out, "  PASS  "), out)
		require.Contains(t, out, "  PASS  every transfer has exactly one outbox row: 3 transfers checked, 0 failing\n")
		require.True(t, strings.HasSuffix(out, "verdict: PASS, all 9 checks hold\n"), out)
	})

	t.Run("an acknowledged row deleted by retention is fine once the transfer is older than it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.pool.Exec(ctx, `UPDATE transfers SET created_at = now() - interval '8 days'`)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `DELETE FROM outbox`)
		require.NoError(t, err)
		out, _, err := b.run(t, "verify")
		require.NoError(t, err, out)
		b.env["EVENTS_RETENTION"] = "240h"
		b.env["EVENTS_INBOX_RETENTION"] = "240h" // at least the outbox's
		out, _, err = b.run(t, "verify")
		require.Error(t, err, "younger than a 10-day retention, the rows must still be there")
		require.Contains(t, out, "FAIL  every transfer has exactly one outbox row: 3 transfers checked, 3 failing")
	})

	t.Run("holds pass, and a tampered held or a lost hold event fails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		store := postgres.NewStore(b.pool, postgres.Options{})
		place := func(key string, amount int64) wallet.Hold {
			h, _, err := store.PlaceHold(ctx, wallet.HoldRequest{IdempotencyKey: key, WalletID: "alice", Amount: amount, ExpiresIn: time.Hour})
			require.NoError(t, err)
			return h
		}
		captured, voided, pending := place("h-1", 100), place("h-2", 200), place("h-3", 300)
		_, _, err := store.CaptureHold(ctx, wallet.CaptureRequest{IdempotencyKey: "c-1", HoldID: captured.ID, ToWalletID: "bob", Amount: 60})
		require.NoError(t, err)
		_, err = store.VoidHold(ctx, voided.ID)
		require.NoError(t, err)
		out, _, err := b.run(t, "verify")
		require.NoError(t, err, out)
		require.Contains(t, out, "  PASS  every wallet's held is the sum of its pending holds: 3 wallets checked, 0 failing\n")
		require.Contains(t, out, "  PASS  every hold has its events, a captured one its transfer, and every hold event its hold: 8 holds and hold events checked, 0 failing\n")

		for _, sql := range []string{
			`UPDATE wallets SET held = held + 1 WHERE id = 'alice'`,
			`DELETE FROM outbox WHERE aggregate_id = '` + pending.ID.String() + `'`,
		} {
			_, err := b.pool.Exec(ctx, sql)
			require.NoError(t, err, sql)
		}
		out, _, err = b.run(t, "verify")
		require.ErrorContains(t, err, "verify: 2 of 9 checks failed")
		require.Contains(t, out, "FAIL  every wallet's held is the sum of its pending holds: 3 wallets checked, 1 failing\n        alice\n")
		require.Contains(t, out, "FAIL  every hold has its events, a captured one its transfer, and every hold event its hold: 7 holds and hold events checked, 1 failing\n        "+pending.ID.String()+"\n")
	})

	t.Run("each broken invariant fails with its ids", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		orphan := uuid.New()
		for _, sql := range []string{
			`DELETE FROM outbox WHERE id = '` + b.transfers[1].EventID.String() + `'`,
			`INSERT INTO outbox (id, event_type, aggregate_id, payload) VALUES ('` + orphan.String() + `', 'TransferCompleted.v1', 'no-such-transfer', '{}')`,
			`ALTER TABLE wallets DROP CONSTRAINT wallets_floor`,
			`UPDATE wallets SET balance = -7 WHERE id = 'bob'`,
		} {
			_, err := b.pool.Exec(ctx, sql)
			require.NoError(t, err, sql)
		}
		out, _, err := b.run(t, "verify")
		require.ErrorContains(t, err, "verify: 5 of 9 checks failed")
		require.Contains(t, out, "FAIL  every transfer has exactly one outbox row: 3 transfers checked, 1 failing\n        "+b.transfers[1].ID.String()+"\n")
		require.Contains(t, out, "FAIL  every outbox row has its transfer: 3 outbox rows checked, 1 failing\n        "+orphan.String()+"\n")
		require.Contains(t, out, "FAIL  every balance equals its transfers in minus out: 3 wallets checked, 1 failing\n        bob\n")
		require.Contains(t, out, "FAIL  balances sum to zero per currency: 1 currencies checked, 1 failing\n        USD=-2507\n")
		require.Contains(t, out, "FAIL  no balance below its floor: 3 wallets checked, 1 failing\n        bob\n")
		require.True(t, strings.HasSuffix(out, "verdict: FAIL, 5 of 9 checks failed\n"), out)

		out, _, err = b.run(t, "verify", "--json")
		require.Error(t, err)
		report := clitest.Verification(t, out)
		require.False(t, report.OK)
		require.Len(t, report.Checks, 9)
		require.Equal(t, cli.Check{Name: "no balance below its floor", OK: false, Checked: 3, Failed: 1, Sample: []string{"bob"},
			Detail: "3 wallets checked, 1 failing"}, report.Checks[4])
	})
}

// acknowledgmentFailed records in the wallet's inbox a failed TransferPosted.v1 of the GL that
// acknowledges the outbox row sourceEventID, as the consumer does when it gives up on one.
func (b *testBundle) acknowledgmentFailed(t *testing.T, sourceEventID string) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7()).String()
	data, err := json.Marshal(contract.TransferPosted{TransferID: "tr-" + sourceEventID, SourceEventID: sourceEventID,
		EntryID: uuid.NewString(), PostedAt: time.Now().UTC()})
	require.NoError(t, err)
	env := contract.Envelope{SpecVersion: "1.0", ID: id, Source: contract.SourceGL, Type: contract.TypeTransferPosted,
		Subject: "tr-" + sourceEventID, Time: time.Now().UTC(), DataContentType: "application/json", Data: data}
	body, err := json.Marshal(env)
	require.NoError(t, err)
	in := inbox.New(events.ConsumerWallet, nil)
	require.NoError(t, in.RecordFailure(context.Background(), b.pool, inbox.Inbound{Env: env, EventID: id, StreamSeq: 3},
		inbox.Failure{Reason: contract.ReasonExhausted, Cause: errors.New("handler failed on 10 deliveries: lock timeout"), Payload: body, Attempts: 10}))
	return in.ID(id)
}

func TestInboxCommandsRetryTheGLsAcknowledgments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row := b.setStatus(t, 0, "dispatched")
	good := b.acknowledgmentFailed(t, row.String())
	bad := b.acknowledgmentFailed(t, "not-an-outbox-id")

	out, _, err := b.run(t, "inbox", "stats")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^failed\s+2$`, out)
	require.Contains(t, out, "duplicates absorbed: 0")

	out, _, err = b.run(t, "inbox", "list", "--limit", "10")
	require.NoError(t, err, "--status defaults to failed")
	require.Contains(t, out, good)
	require.Contains(t, out, "exhausted  handler failed on 10 deliveries: lock timeout")
	require.Contains(t, out, "2 failed rows shown (limit 10)")

	out, _, err = b.run(t, "inbox", "retry", good, bad)
	require.ErrorContains(t, err, "inbox retry: 1 of 2 events still fail")
	require.Regexp(t, good+`\s+processed`, out)
	require.Regexp(t, bad+`\s+still failed: .*not a uuid`, out)
	require.Equal(t, "acknowledged", b.status(t, row), "the retried acknowledgment acknowledged its outbox row")

	out, _, err = b.run(t, "inbox", "stats", "--json")
	require.NoError(t, err)
	require.JSONEq(t, `{"counts":{"processing":0,"waiting":0,"processed":1,"failed":1,"duplicate":0,"resolved":0},"duplicates":0,`+
		`"failed_by_reason":{"malformed":0,"conflict":0,"exhausted":1,"unauthenticated":0,"abandoned":0}}`, out)

	out, _, err = b.run(t, "inbox", "list", "--status", "processed", "--json")
	require.NoError(t, err)
	var rows []admin.InboxRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	require.Equal(t, good, rows[0].ID)

	_, _, err = b.run(t, "inbox", "retry")
	require.ErrorContains(t, err, "give the ids of failed inbox rows (wallet:<event id>, or the event id)")
}

func TestInboxResolveClosesPoisonEventsWithTheOperatorsReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	row := b.setStatus(t, 0, "dispatched")
	processed := b.acknowledgmentFailed(t, row.String())
	poison := b.acknowledgmentFailed(t, "not-an-outbox-id")
	_, _, err := b.run(t, "inbox", "retry", processed)
	require.NoError(t, err)
	clitest.InboxResolve(t, run, b.env, events.ConsumerWallet, poison, processed)
}

func TestEveryCommandAnswersHelp(t *testing.T) {
	t.Parallel()
	commands := clitest.EveryCommandHelps(t, run)
	require.Equal(t, []string{
		"serve", "migrate",
		"outbox stats", "outbox list", "outbox show", "outbox requeue", "outbox reconcile", "outbox republish", "outbox rebuild",
		"inbox stats", "inbox list", "inbox retry", "inbox abandon", "inbox resolve",
		"keys create", "keys list", "keys revoke", "events keygen", "events setup", "audit list", "verify", "status",
	}, commands)
}

// The wallet signs its events with its own key and accepts the GL's alone.
func TestServeNeedsEventKeys(t *testing.T) {
	t.Parallel()
	clitest.SignedEvents(t, run, contract.SourceWallet, contract.SourceGL, map[string]string{"WALLET_DATABASE_URL": envtest.DatabaseURL(t), "LOG_FORMAT": "json"})
}

// The wallet runs as its own least-privileged NATS user once the operator set the topology up.
func TestBrokerUsers(t *testing.T) {
	t.Parallel()
	clitest.BrokerUsers(t, run, contract.SourceWallet, map[string]string{"WALLET_DATABASE_URL": envtest.DatabaseURL(t)})
}

func TestAMarkDelayThatTheLeaseCannotCoverIsRefused(t *testing.T) {
	t.Parallel()
	env := map[string]string{"WALLET_DATABASE_URL": envtest.DatabaseURL(t), "EVENTS_MARK_DELAY": "20s"}
	_, _, err := (&testBundle{env: env}).run(t, "serve")
	require.ErrorContains(t, err, "EVENTS_MARK_DELAY must be between 0 and half of EVENTS_LEASE and EVENTS_ACK_TIMEOUT (15s), got 20s")
	env["EVENTS_LEASE"] = "60s"
	env["EVENTS_ACK_TIMEOUT"] = "60s"
	_, _, err = (&testBundle{env: env}).run(t, "serve")
	require.NotContains(t, fmt.Sprint(err), "EVENTS_MARK_DELAY", "within half a longer lease and timeout")
}
