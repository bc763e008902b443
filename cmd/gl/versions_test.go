package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/gl/posting"
)

// publishVersion sends a transfer event of eventType on its own subject, signed by the wallet.
func (b *replayBundle) publishVersion(t *testing.T, eventType string, transfer contract.TransferCompleted) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	data, err := json.Marshal(transfer.AsVersion(eventType))
	require.NoError(t, err)
	body, err := json.Marshal(contract.Envelope{
		SpecVersion: "1.0", ID: id.String(), Source: contract.SourceWallet, Type: eventType,
		Subject: transfer.TransferID, Time: transfer.CreatedAt, DataContentType: "application/json", Data: data,
	})
	require.NoError(t, err)
	msg := nats.NewMsg(b.topo.Subject(contract.SourceWallet, eventType))
	msg.Data = body
	b.keys.Wallet.Sign(msg)
	_, err = b.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(id.String()))
	require.NoError(t, err)
	return id
}

// startLiveAsServed runs the GL consumer with the topology's own spec of it (every version it
// accepts), as gl serve does.
func (b *replayBundle) startLiveAsServed(t *testing.T) (stop func()) {
	t.Helper()
	spec, err := b.topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	spec.AckWait, spec.MaxDeliver = 5*time.Second, 5
	ledger := postgres.NewLedger(b.live)
	consumer, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, BatchSize: 5, Trust: b.keys.Trust},
		b.topo, b.nc, b.live, posting.New(ledger, zerolog.Nop()), zerolog.Nop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx) }()
	return func() {
		cancel()
		require.NoError(t, <-done)
	}
}

func inboxStatus(t *testing.T, b *replayBundle, eventID uuid.UUID) (status, reason string) {
	t.Helper()
	err := b.live.QueryRow(context.Background(), `SELECT status, coalesce(reason, '') FROM inbox WHERE event_id = $1`, eventID.String()).Scan(&status, &reason)
	if err != nil {
		return "", ""
	}
	return status, reason
}

// TestTransferCompletedVersions: the GL posts v1 and v2 side by side, each by its rule, a rule
// change posts only later transfers differently, an unknown version is dead-lettered, and a
// replay rebuilds the same postings.
func TestTransferCompletedVersions(t *testing.T) {
	t.Parallel()
	b := newReplayBundle(t)
	b.live, b.liveURL = envtest.MigratedPool(t, "gl")
	ctx := context.Background()
	_, err := postgres.NewLedger(b.live).AddAccount(ctx, gl.Account{Code: "1020", Name: "Cash at the second bank", Type: gl.Asset, NormalBalance: gl.Debit})
	require.NoError(t, err)

	now := time.Now().UTC()
	transfer := func(id, kind string, amount int64, at time.Time) contract.TransferCompleted {
		return contract.TransferCompleted{TransferID: id, FromWalletID: "w-a", ToWalletID: "w-b", Amount: amount, Currency: "USD", Kind: kind, Reference: "ref " + id, CreatedAt: at}
	}
	stop := b.startLiveAsServed(t)
	b.publishVersion(t, contract.TypeTransferCompleted, transfer("v1", "", 10, now))
	b.publishVersion(t, contract.TypeTransferCompletedV2, transfer("v2-deposit", contract.KindDeposit, 20, now))
	b.publishVersion(t, contract.TypeTransferCompletedV2, transfer("v2-transfer", contract.KindTransfer, 30, now))
	b.publishVersion(t, contract.TypeTransferCompletedV2, transfer("v2-withdrawal", contract.KindWithdrawal, 40, now))
	v9 := b.publishVersion(t, "TransferCompleted.v9", transfer("v9", contract.KindDeposit, 50, now))
	b.waitForEntries(t, 4)
	require.Eventually(t, func() bool {
		status, reason := inboxStatus(t, b, v9)
		return status == "failed" && reason == contract.ReasonMalformed
	}, 30*time.Second, 50*time.Millisecond, "TransferCompleted.v9 is dead-lettered")

	// A new rule for deposits from now on: a later deposit posts by it.
	out, _, err := runGL(t, b.env(b.liveURL), "rules", "set", "--event-type", contract.TypeTransferCompletedV2, "--kind", contract.KindDeposit, "--debit", "1020", "--credit", "2010")
	require.NoError(t, err, out)
	b.publishVersion(t, contract.TypeTransferCompletedV2, transfer("v2-deposit-later", contract.KindDeposit, 60, time.Now().UTC().Add(time.Second)))
	b.waitForEntries(t, 5)
	stop()

	want := postings(t, b.live)
	accounts := map[string]string{}
	for _, p := range want {
		accounts[p.TransferID+" "+p.Direction] = p.Account
	}
	require.Equal(t, map[string]string{
		"v1 debit": "1010", "v1 credit": "2010",
		"v2-deposit debit": "1010", "v2-deposit credit": "2010",
		"v2-transfer debit": "2010", "v2-transfer credit": "2010",
		"v2-withdrawal debit": "2010", "v2-withdrawal credit": "1010",
		"v2-deposit-later debit": "1020", "v2-deposit-later credit": "2010",
	}, accounts)

	out, _, err = runGL(t, b.env(b.liveURL), "verify")
	require.NoError(t, err, out)
	require.Contains(t, out, "PASS  every entry's lines are those of the posting rule in force for its event type, kind and time: 5 checked, 0 failing")

	target := envtest.DatabaseURL(t)
	out, _, err = runGL(t, b.env(b.liveURL), "replay", "--from-start", "--no-reconcile", "--into", target)
	require.NoError(t, err, out)
	require.Contains(t, out, "entries posted       5\n")
	require.Contains(t, out, "dead-lettered        1 ")
	pool, err := database.Open(ctx, target, 2)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.Equal(t, want, postings(t, pool), "the replay posts each event by the rule the live GL used")
}
