package posting_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	"walletgl/internal/gl/posting"
)

var holdTime = time.Date(2025, 3, 3, 12, 0, 0, 0, time.UTC)

func holdEnvelope(t *testing.T, typ, holdID string, data any) contract.Envelope {
	t.Helper()
	body, err := json.Marshal(data)
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.Must(uuid.NewV7()).String(), Source: contract.SourceWallet,
		Type: typ, Subject: holdID, Time: time.Now().UTC(), DataContentType: "application/json", Data: body,
	}
}

func holdPlaced(t *testing.T, holdID, wallet string, amount int64, currency string) contract.Envelope {
	t.Helper()
	return holdEnvelope(t, contract.TypeHoldPlaced, holdID, contract.HoldPlaced{
		HoldID: holdID, WalletID: wallet, Amount: amount, Currency: currency,
		ExpiresAt: holdTime.Add(time.Hour), CreatedAt: holdTime,
	})
}

func holdCaptured(t *testing.T, holdID, transferID, wallet string, amount, captured int64, currency string) contract.Envelope {
	t.Helper()
	return holdEnvelope(t, contract.TypeHoldCaptured, holdID, contract.HoldCaptured{
		HoldID: holdID, TransferID: transferID, WalletID: wallet, ToWalletID: "w-to",
		Amount: amount, CapturedAmount: captured, Currency: currency, CreatedAt: holdTime.Add(time.Minute),
	})
}

func holdVoided(t *testing.T, holdID, wallet string, amount int64, currency, reason string) contract.Envelope {
	t.Helper()
	return holdEnvelope(t, contract.TypeHoldVoided, holdID, contract.HoldVoided{
		HoldID: holdID, WalletID: wallet, Amount: amount, Currency: currency, Reason: reason, CreatedAt: holdTime.Add(time.Minute),
	})
}

func newHoldID() string { return "hold-" + uuid.Must(uuid.NewV7()).String() }

// holdBalance is account 2020's balance in currency (credit-normal: what is on hold).
func (b *testBundle) holdBalance(t *testing.T, currency string) string {
	t.Helper()
	bal, err := b.ledger.AccountBalance(context.Background(), gl.DefaultHoldRules.HoldAccount(), currency, nil)
	require.NoError(t, err)
	return bal.Balance().String()
}

func TestAHoldIsPlacedOn2020AndReleasedByItsCaptureOrVoid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	captured, voided := newHoldID(), newHoldID()
	transferID := newTransferID()

	placed := holdPlaced(t, captured, "w-1", 1000, "USD")
	require.NoError(t, b.handle(t, h, placed))
	require.NoError(t, b.handle(t, h, holdPlaced(t, voided, "w-2", 250, "USD")))
	require.Equal(t, "1250", b.holdBalance(t, "USD"), "2020 holds both open holds")

	entries, err := b.ledger.EntriesByTransfer(ctx, gl.HoldPlacedKey(captured))
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, captured, entries[0].HoldID)
	require.Equal(t, placed.ID, entries[0].EventID)
	require.Equal(t, []gl.Line{
		{AccountCode: "2010", Direction: gl.Debit, Amount: 1000, WalletID: "w-1"},
		{AccountCode: "2020", Direction: gl.Credit, Amount: 1000, WalletID: "w-1"},
	}, entries[0].Lines)

	// A capture comes with its transfer's TransferCompleted, in one batch: the transfer is
	// posted as any transfer, the hold released whole.
	capture := holdCaptured(t, captured, transferID, "w-1", 1000, 600, "USD")
	require.NoError(t, database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		return h.Handle(ctx, tx, []contract.Envelope{capture, transferCompleted(t, transferID, 600, "USD")})
	}))
	require.Equal(t, "250", b.holdBalance(t, "USD"))
	require.NoError(t, b.handle(t, h, holdVoided(t, voided, "w-2", 250, "USD", contract.VoidExpired)))
	require.Equal(t, "0", b.holdBalance(t, "USD"), "no open hold: 2020 is back to zero")

	released, err := b.ledger.EntriesByTransfer(ctx, gl.HoldReleasedKey(captured))
	require.NoError(t, err)
	require.Len(t, released, 1)
	require.Equal(t, captured, released[0].HoldID)
	require.Equal(t, []gl.Line{
		{AccountCode: "2020", Direction: gl.Debit, Amount: 1000, WalletID: "w-1"},
		{AccountCode: "2010", Direction: gl.Credit, Amount: 1000, WalletID: "w-1"},
	}, released[0].Lines)

	// Every event is acknowledged, the capture's under the release's movement key.
	acks := b.acknowledgments(t)
	require.Len(t, acks, 5)
	bySource := map[string]contract.TransferPosted{}
	for _, a := range acks {
		bySource[a.SourceEventID] = a
	}
	require.Equal(t, gl.HoldReleasedKey(captured), bySource[capture.ID].TransferID)
	require.Equal(t, released[0].ID.String(), bySource[capture.ID].EntryID)

	tb, err := b.ledger.TrialBalance(ctx)
	require.NoError(t, err)
	require.True(t, tb.Balanced)
}

func TestAHoldReleaseBeforeItsPlacementWaitsAndContradictionsConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	holdID := newHoldID()

	err := b.handle(t, h, holdVoided(t, holdID, "w-1", 500, "USD", contract.VoidRequested))
	require.ErrorIs(t, err, contract.ErrNotYet, "the placement is not posted yet: delivered again later")
	require.NotErrorIs(t, err, contract.ErrMalformed)
	err = b.handle(t, h, holdCaptured(t, holdID, newTransferID(), "w-1", 500, 500, "USD"))
	require.ErrorIs(t, err, contract.ErrNotYet)

	require.NoError(t, b.handle(t, h, holdPlaced(t, holdID, "w-1", 500, "USD")))
	tests := []struct {
		name string
		env  contract.Envelope
	}{
		{"a release of another wallet", holdVoided(t, holdID, "w-2", 500, "USD", contract.VoidRequested)},
		{"a release in another currency", holdVoided(t, holdID, "w-1", 500, "EUR", contract.VoidRequested)},
		{"a release of another amount", holdCaptured(t, holdID, newTransferID(), "w-1", 400, 400, "USD")},
		{"the same hold placed again with other figures", holdPlaced(t, holdID, "w-1", 501, "USD")},
	}
	for _, tt := range tests {
		require.ErrorIs(t, b.handle(t, h, tt.env), contract.ErrConflict, tt.name)
	}
	require.Equal(t, "500", b.holdBalance(t, "USD"), "nothing contradicting was posted")

	require.NoError(t, b.handle(t, h, holdVoided(t, holdID, "w-1", 500, "USD", contract.VoidExpired)))
	require.ErrorIs(t, b.handle(t, h, holdCaptured(t, holdID, newTransferID(), "w-1", 500, 500, "USD")), contract.ErrConflict,
		"a hold voided cannot be captured too")
	require.Equal(t, "0", b.holdBalance(t, "USD"))

	// Neither a transfer nor a reversal can take a hold's movement key, nor reverse a hold.
	require.ErrorIs(t, b.handle(t, h, transferCompleted(t, gl.HoldPlacedKey(newHoldID()), 5, "USD")), contract.ErrMalformed)
	require.ErrorIs(t, b.handle(t, h, transferReversed(t, newTransferID(), gl.HoldPlacedKey(holdID), 500, "USD")), contract.ErrConflict)
}

func TestAHoldEventPostedBeforeIsAcknowledgedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	holdID := newHoldID()
	placed := holdPlaced(t, holdID, "w-1", 300, "EUR")
	voided := holdVoided(t, holdID, "w-1", 300, "EUR", contract.VoidRequested)
	require.NoError(t, b.handle(t, h, placed))
	require.NoError(t, b.handle(t, h, voided))
	require.NoError(t, database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		return h.HandleDuplicates(ctx, tx, []contract.Envelope{placed, voided})
	}))
	// The same release by another event with the same figures: a conflict, not posted again
	// and not acknowledged.
	again := voided
	again.ID = uuid.Must(uuid.NewV7()).String()
	require.ErrorIs(t, b.handle(t, h, again), contract.ErrConflict)

	acks := b.acknowledgments(t)
	require.Len(t, acks, 4)
	entries, err := b.ledger.EntriesByTransfer(ctx, gl.HoldReleasedKey(holdID))
	require.NoError(t, err)
	require.Len(t, entries, 1, "released once")
	require.Equal(t, entries[0].ID.String(), acks[3].EntryID)
	require.Equal(t, "0", b.holdBalance(t, "EUR"))
}

// Through the real consumer, inbox and JetStream: a void published before its hold's placement
// waits for it in the inbox, then both are posted exactly once, even when every event is published again
// under another message id; gl verify then finds nothing wrong.
func TestTheGLConsumerPostsAReleaseThatArrivesBeforeItsPlacementExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	natsURL := envtest.NATSURL(t)
	topo := envtest.Topology(t, natsURL)
	keys := envtest.NewEventKeys(t)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	nc, err := events.Connect(ctx, natsURL, t.Name(), log)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, topo.EnsureStreams(ctx, js))

	publish := func(env contract.Envelope, msgID string) {
		body, err := json.Marshal(env)
		require.NoError(t, err)
		msg := nats.NewMsg(topo.Subject(contract.SourceWallet, env.Type))
		msg.Data = body
		keys.Signer(contract.SourceWallet).Sign(msg)
		_, err = js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
		require.NoError(t, err)
	}
	holdID, open := newHoldID(), newHoldID()
	placed := holdPlaced(t, holdID, "w-1", 800, "USD")
	voided := holdVoided(t, holdID, "w-1", 800, "USD", contract.VoidExpired)
	stillOpen := holdPlaced(t, open, "w-2", 70, "USD")
	publish(voided, voided.ID)

	spec, err := topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	poster := posting.New(b.ledger, log)
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, RetryDelay: 50 * time.Millisecond, Trust: keys.Trust},
		topo, nc, b.pool, poster, log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, cons.Run(runCtx)) })
	// The void alone cannot be posted: it is parked in the inbox until its placement comes.
	require.Eventually(t, func() bool { return cons.Stats().Waited == 1 }, 60*time.Second, 20*time.Millisecond)
	require.Zero(t, cons.Stats().Processed)
	publish(placed, placed.ID)
	publish(stillOpen, stillOpen.ID)
	publish(voided, "again-"+voided.ID)
	publish(placed, "again-"+placed.ID)
	require.Eventually(t, func() bool {
		s := cons.Stats()
		return s.Processed == 2 && s.Released == 1 && s.Duplicates == 2
	}, 60*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()

	require.Equal(t, "70", b.holdBalance(t, "USD"), "2020 holds the open hold only")
	checks, err := b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	for _, c := range checks {
		require.Zero(t, c.Failures, "%s: %v", c.Name, c.Offenders)
	}
}

// In one batch, placements are posted before releases: a release right behind its placement,
// even ahead of it in the batch, needs no redelivery.
func TestABatchPostsAHoldsPlacementBeforeItsRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	voidedID, capturedID, transferID := newHoldID(), newHoldID(), newTransferID()
	batch := []contract.Envelope{
		holdVoided(t, voidedID, "w-1", 40, "GBP", contract.VoidRequested),
		holdCaptured(t, capturedID, transferID, "w-2", 90, 90, "GBP"),
		transferCompleted(t, transferID, 90, "GBP"),
		holdPlaced(t, capturedID, "w-2", 90, "GBP"),
		holdPlaced(t, voidedID, "w-1", 40, "GBP"),
		holdPlaced(t, newHoldID(), "w-3", 7, "GBP"),
	}
	require.NoError(t, b.handleBatch(t, h, batch))
	require.Equal(t, "7", b.holdBalance(t, "GBP"))
	acks := b.acknowledgments(t)
	require.Len(t, acks, len(batch))
	for i, ack := range acks {
		require.Equal(t, batch[i].ID, ack.SourceEventID, "acknowledged in the batch's order")
	}
	require.Equal(t, gl.HoldReleasedKey(voidedID), acks[0].TransferID)
	tb, err := b.ledger.TrialBalance(ctx)
	require.NoError(t, err)
	require.True(t, tb.Balanced)
}
