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

// publishEvent sends data as a signed wallet event of type typ on its own subject, under
// msgID, and returns the envelope's id.
func (b *replayBundle) publishEvent(t *testing.T, eventID, typ, subject string, data any, msgID string) {
	t.Helper()
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	body, err := json.Marshal(contract.Envelope{
		SpecVersion: "1.0", ID: eventID, Source: contract.SourceWallet, Type: typ,
		Subject: subject, Time: time.Now().UTC(), DataContentType: "application/json", Data: raw,
	})
	require.NoError(t, err)
	msg := nats.NewMsg(b.topo.Subject(contract.SourceWallet, typ))
	msg.Data = body
	b.keys.Wallet.Sign(msg)
	_, err = b.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(msgID))
	require.NoError(t, err)
}

// The replay rebuilds holds' placements and releases as the live GL posted them: the same
// postings, account 2020 at the open holds, gl verify passing and the wallet's transfers
// reconciled with the hold entries left out.
func TestReplayRebuildsHoldPostings(t *testing.T) {
	t.Parallel()
	b := newReplayBundle(t)
	b.live, b.liveURL = envtest.MigratedPool(t, "gl")
	captureTransfer := gl.SourceTransfer{ID: "tr-capture", Amount: 600, Currency: "USD"}
	_, b.walletURL = startWalletAPI(t, captureTransfer)

	now := time.Now().UTC()
	type event struct {
		id, typ, subject string
		data             any
	}
	placed := func(hold, wallet string, amount int64, currency string) event {
		return event{uuid.NewString(), contract.TypeHoldPlaced, hold, contract.HoldPlaced{
			HoldID: hold, WalletID: wallet, Amount: amount, Currency: currency, ExpiresAt: now.Add(time.Hour), CreatedAt: now}}
	}
	stream := []event{
		placed("h-captured", "w-a", 1000, "USD"),
		placed("h-voided", "w-b", 300, "EUR"),
		placed("h-open", "w-a", 50, "USD"),
		{uuid.NewString(), contract.TypeHoldCaptured, "h-captured", contract.HoldCaptured{
			HoldID: "h-captured", TransferID: captureTransfer.ID, WalletID: "w-a", ToWalletID: "w-b",
			Amount: 1000, CapturedAmount: 600, Currency: "USD", CreatedAt: now}},
		{uuid.NewString(), contract.TypeTransferCompleted, captureTransfer.ID, contract.TransferCompleted{
			TransferID: captureTransfer.ID, FromWalletID: "w-a", ToWalletID: "w-b", Amount: 600, Currency: "USD", CreatedAt: now}},
		{uuid.NewString(), contract.TypeHoldVoided, "h-voided", contract.HoldVoided{
			HoldID: "h-voided", WalletID: "w-b", Amount: 300, Currency: "EUR", Reason: contract.VoidExpired, CreatedAt: now}},
	}
	for _, e := range stream {
		b.publishEvent(t, e.id, e.typ, e.subject, e.data, e.id)
	}
	first := stream[0] // published again past the broker's dedupe: only the inbox stops it
	b.publishEvent(t, first.id, first.typ, first.subject, first.data, first.id+"-again")

	spec, err := b.topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	consumer, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, BatchSize: 5, Trust: b.keys.Trust, RetryDelay: 50 * time.Millisecond},
		b.topo, b.nc, b.live, posting.New(postgres.NewLedger(b.live), zerolog.Nop()), zerolog.Nop())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx) }()
	b.waitForEntries(t, int64(len(stream)))
	cancel()
	require.NoError(t, <-done)
	want := postings(t, b.live)
	require.Len(t, want, 2*len(stream))

	target := envtest.DatabaseURL(t)
	out, _, err := runGL(t, b.env(b.liveURL), "replay", "--from-start", "--batch", "1", "--concurrency", "3", "--into", target)
	require.NoError(t, err, out)
	require.Contains(t, out, "entries posted       6\n")
	require.Contains(t, out, "duplicates skipped   1\n")
	require.Contains(t, out, "verdict: RECONCILED — 1 transfers, 1 entries", "hold entries are no unmatched transfers")
	require.Contains(t, out, "holds USD  2 placed, 1 open totalling 0.50; account 2020 0.50 (equal)")
	require.Contains(t, out, "holds EUR  1 placed, 0 open totalling 0.00; account 2020 0.00 (equal)")

	pool, err := database.Open(context.Background(), target, 2)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.Equal(t, want, postings(t, pool))
	out, _, err = runGL(t, b.env(target), "verify")
	require.NoError(t, err, out)
	require.Contains(t, out, "every hold's release has its placement, in its currency and amount: 2 checked, 0 failing")
}
