package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/cli/clitest"
	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl/postgres"
)

func failedEvent(t *testing.T, pool *pgxpool.Pool, transferID string, amount int64) string {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	data, err := json.Marshal(contract.TransferCompleted{TransferID: transferID, FromWalletID: "bank", ToWalletID: "alice",
		Amount: amount, Currency: "USD", CreatedAt: time.Now().UTC()})
	require.NoError(t, err)
	env := contract.Envelope{SpecVersion: "1.0", ID: id.String(), Source: "wallet", Type: contract.TypeTransferCompleted,
		Subject: transferID, Time: time.Now().UTC(), DataContentType: "application/json", Data: data}
	body, err := json.Marshal(env)
	require.NoError(t, err)
	in := inbox.New("gl", nil)
	require.NoError(t, in.RecordFailure(context.Background(), pool, inbox.Inbound{Env: env, EventID: id.String(), StreamSeq: 7},
		inbox.Failure{Reason: contract.ReasonExhausted, Cause: errors.New("handler failed on 10 deliveries: no such account"), Payload: body, Attempts: 10}))
	return in.ID(id.String())
}

func TestInboxCommands(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	good := failedEvent(t, pool, "transfer-good", 1200)
	bad := failedEvent(t, pool, "transfer-bad", 0)
	env := map[string]string{"GL_DATABASE_URL": dbURL, "LOG_FORMAT": "json", "LOG_LEVEL": "warn"}
	gl := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
		return out.String(), err
	}

	out, err := gl("inbox", "stats")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^failed\s+2$`, out)
	require.Contains(t, out, "duplicates absorbed: 0")
	require.Regexp(t, `failed by reason: malformed \d+, conflict \d+, exhausted \d+, unauthenticated 0, abandoned 0\n`, out)

	out, err = gl("inbox", "list", "--status", "failed", "--limit", "10")
	require.NoError(t, err)
	require.Contains(t, out, good)
	require.Contains(t, out, "exhausted  handler failed on 10 deliveries")

	out, err = gl("inbox", "retry", good, bad)
	require.ErrorContains(t, err, "1 of 2 events still fail")
	require.Regexp(t, good+`\s+processed`, out)
	require.Regexp(t, bad+`\s+still failed: .*amount 0 is not positive`, out)

	entries, err := postgres.NewLedger(pool).EntriesByTransfer(context.Background(), "transfer-good")
	require.NoError(t, err)
	require.Len(t, entries, 1, "the retried event is posted")
	require.Equal(t, int64(1200), entries[0].Lines[0].Amount)

	out, err = gl("inbox", "stats", "--json")
	require.NoError(t, err)
	require.JSONEq(t, `{"counts":{"processing":0,"waiting":0,"processed":1,"failed":1,"duplicate":0,"resolved":0},"duplicates":0,`+
		`"failed_by_reason":{"malformed":0,"conflict":0,"exhausted":1,"unauthenticated":0,"abandoned":0}}`, out)

	_, err = gl("inbox", "retry", good)
	require.ErrorContains(t, err, "1 of 1 events still fail", "a processed event is not processed again")
	entries, err = postgres.NewLedger(pool).EntriesByTransfer(context.Background(), "transfer-good")
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

func TestInboxResolveClosesPoisonEventsWithTheOperatorsReason(t *testing.T) {
	t.Parallel()
	pool, dbURL := envtest.MigratedPool(t, "gl")
	posted := failedEvent(t, pool, "transfer-good", 1200)
	poison := failedEvent(t, pool, "transfer-bad", 0)
	env := map[string]string{"GL_DATABASE_URL": dbURL, "LOG_FORMAT": "json", "LOG_LEVEL": "warn"}
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"inbox", "retry", posted}, func(k string) string { return env[k] }, &out, &errOut))
	clitest.InboxResolve(t, run, env, "gl", poison, posted)

	entries, err := postgres.NewLedger(pool).EntriesByTransfer(context.Background(), "transfer-bad")
	require.NoError(t, err)
	require.Empty(t, entries, "a resolved event is never posted")
}
