package posting_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl"
	"walletgl/internal/gl/posting"
)

func transferReversed(t *testing.T, reversalID, transferID string, amount int64, currency string) contract.Envelope {
	t.Helper()
	data, err := json.Marshal(contract.TransferReversed{
		ReversalID: reversalID, TransferID: transferID, FromWalletID: "w-to", ToWalletID: "w-from",
		Amount: amount, Currency: currency, CreatedAt: time.Date(2025, 3, 2, 12, 0, 0, 0, time.UTC),
	})
	require.NoError(t, err)
	return contract.Envelope{
		SpecVersion: "1.0", ID: uuid.Must(uuid.NewV7()).String(), Source: contract.SourceWallet,
		Type: contract.TypeTransferReversed, Subject: reversalID, Time: time.Now().UTC(),
		DataContentType: "application/json", Data: data,
	}
}

func TestReversalPostsTheOriginalsLinesSwappedAndLinksBothWays(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	transferID, reversalID := newTransferID(), newTransferID()
	require.NoError(t, b.handle(t, h, transferCompleted(t, transferID, 1000, "USD")))
	rev := transferReversed(t, reversalID, transferID, 400, "USD")
	require.NoError(t, b.handle(t, h, rev))

	originals, err := b.ledger.EntriesByTransfer(ctx, transferID)
	require.NoError(t, err)
	require.Len(t, originals, 1)
	reversals, err := b.ledger.EntriesByTransfer(ctx, reversalID)
	require.NoError(t, err)
	require.Len(t, reversals, 1)
	orig, r := originals[0], reversals[0]
	require.True(t, r.Balanced())
	require.Equal(t, rev.ID, r.EventID)
	require.Equal(t, orig.ID, r.ReversesEntryID, "the reversal names its original")
	require.Equal(t, contract.TypeTransferReversed, r.EventType, "the reversal's entry carries its own event's type")
	require.Equal(t, orig.Kind, r.Kind)
	require.Equal(t, []uuid.UUID{r.ID}, orig.ReversedBy, "the original shows its reversal")
	require.Equal(t, []gl.Line{
		{AccountCode: "1010", Direction: gl.Credit, Amount: 400, WalletID: "w-from"},
		{AccountCode: "2010", Direction: gl.Debit, Amount: 400, WalletID: "w-to"},
	}, r.Lines)

	// The acknowledgment names the reversal's event: the wallet acknowledges its outbox row.
	acks := b.acknowledgments(t)
	require.Len(t, acks, 2)
	require.Equal(t, reversalID, acks[1].TransferID)
	require.Equal(t, rev.ID, acks[1].SourceEventID)
	require.Equal(t, r.ID.String(), acks[1].EntryID)

	// The same reversal by another event with the same figures: a conflict, no second entry;
	// a redelivery of the same event past the inbox: acknowledged again.
	again := transferReversed(t, reversalID, transferID, 400, "USD")
	require.ErrorIs(t, b.handle(t, h, again), contract.ErrConflict)
	require.NoError(t, b.handle(t, h, rev))
	reversals, err = b.ledger.EntriesByTransfer(ctx, reversalID)
	require.NoError(t, err)
	require.Len(t, reversals, 1)

	tb, err := b.ledger.TrialBalance(ctx)
	require.NoError(t, err)
	require.True(t, tb.Balanced)
}

func TestReversalBeforeItsTransferWaitsAndConflictsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := posting.New(b.ledger, zerolog.Nop())
	transferID := newTransferID()

	err := b.handle(t, h, transferReversed(t, newTransferID(), transferID, 10, "USD"))
	require.ErrorIs(t, err, contract.ErrNotYet, "the original is not posted yet: delivered again later")
	require.NotErrorIs(t, err, contract.ErrMalformed)

	require.NoError(t, b.handle(t, h, transferCompleted(t, transferID, 100, "USD")))
	tests := []struct {
		name string
		env  contract.Envelope
	}{
		{"a reversal in another currency", transferReversed(t, newTransferID(), transferID, 10, "EUR")},
		{"a reversal beyond the original", transferReversed(t, newTransferID(), transferID, 101, "USD")},
	}
	for _, tt := range tests {
		require.ErrorIs(t, b.handle(t, h, tt.env), contract.ErrConflict, tt.name)
	}
}

// Through the real consumer, inbox and JetStream: a reversal published before its transfer
// waits for it, then both are posted exactly once, linked, even when every event is published
// again under another message id (past the broker's dedupe: only the inbox stops it).
func TestTheGLConsumerPostsAReversalThatArrivesBeforeItsTransferExactlyOnce(t *testing.T) {
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
	transferID, reversalID := newTransferID(), newTransferID()
	completed := transferCompleted(t, transferID, 500, "USD")
	reversed := transferReversed(t, reversalID, transferID, 500, "USD")
	unknown := completed
	unknown.ID, unknown.Type = uuid.NewString(), "TransferRefunded.v1"
	publish(reversed, reversed.ID)
	publish(unknown, unknown.ID)

	spec, err := topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	poster := posting.New(b.ledger, log)
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, RetryDelay: 50 * time.Millisecond, Trust: keys.Trust},
		topo, nc, b.pool, poster, log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, cons.Run(runCtx)) })
	// The reversal alone cannot be posted: it is parked in the inbox, without counting against
	// it, until its transfer comes.
	require.Eventually(t, func() bool { return cons.Stats().Waited == 1 }, 60*time.Second, 20*time.Millisecond)
	require.Zero(t, cons.Stats().Processed)
	publish(completed, completed.ID)
	publish(reversed, "again-"+reversed.ID)
	publish(completed, "again-"+completed.ID)
	require.Eventually(t, func() bool {
		s := cons.Stats()
		return s.Processed == 1 && s.Released == 1 && s.Duplicates == 2 && s.Failed == 1
	}, 60*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()

	originals, err := b.ledger.EntriesByTransfer(ctx, transferID)
	require.NoError(t, err)
	reversals, err := b.ledger.EntriesByTransfer(ctx, reversalID)
	require.NoError(t, err)
	require.Len(t, originals, 1)
	require.Len(t, reversals, 1)
	require.Equal(t, originals[0].ID, reversals[0].ReversesEntryID)

	checks, err := b.ledger.Verify(ctx, 0)
	require.NoError(t, err)
	for _, c := range checks {
		require.Zero(t, c.Failures, "%s: %v", c.Name, c.Offenders)
	}
	var status string
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT status FROM inbox WHERE id = $1", "gl:"+unknown.ID).Scan(&status))
	require.Equal(t, "failed", status, "a type the GL does not take is dead-lettered")
}
