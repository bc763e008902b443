package posting_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/admin"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/gl/posting"
)

// Reversals whose originals never come must not take the broker's ack-pending slots: with
// room for two unacknowledged messages, three of them stalled every later event of the GL
// (redelivered without end, each copy pending at the broker). They wait in the inbox instead,
// acknowledged; the transfers after them post, and a reversal posts once its original does.
func TestReversalsWhoseOriginalsNeverPostDoNotStopTheEventsAfterThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	br := newLiveBroker(t)
	topo, keys, log, nc, js, publish := br.topo, br.keys, br.log, br.nc, br.js, br.publish

	missing := []string{newTransferID(), newTransferID(), newTransferID()}
	reversals := make([]contract.Envelope, len(missing))
	for i, id := range missing {
		reversals[i] = transferReversed(t, newTransferID(), id, 100, "USD")
		publish(reversals[i])
	}
	later := make([]string, 5)
	for i := range later {
		later[i] = newTransferID()
		publish(transferCompleted(t, later[i], 100, "USD"))
	}

	spec, err := topo.Consumer(events.ConsumerGL)
	require.NoError(t, err)
	spec.MaxAckPending = 2
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, BatchSize: 1, RetryDelay: 50 * time.Millisecond, Trust: keys.Trust},
		topo, nc, b.pool, posting.New(b.ledger, log), log)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { require.NoError(t, cons.Run(runCtx)) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	require.Eventually(t, func() bool {
		s := cons.Stats()
		return s.Processed == int64(len(later)) && s.Waited == int64(len(missing))
	}, 60*time.Second, 20*time.Millisecond, "the transfers after the waiting reversals are delivered and posted")
	durable, err := js.Consumer(ctx, topo.StreamName(contract.SourceWallet), spec.Name)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := durable.Info(ctx)
		require.NoError(t, err)
		return info.NumAckPending == 0 && info.NumPending == 0
	}, 30*time.Second, 20*time.Millisecond, "a waiting event holds no ack-pending slot")

	rows, err := admin.New(b.pool).ListInbox(ctx, contract.StatusWaiting, 10)
	require.NoError(t, err)
	require.Len(t, rows, len(missing))
	waitsFor := map[string]bool{}
	for _, r := range rows {
		waitsFor[r.WaitsFor] = true
		require.NotEmpty(t, r.Payload, "a waiting row keeps its payload to apply later")
	}
	for _, id := range missing {
		require.True(t, waitsFor[contract.WaitTransfer(id)], "a waiting row names the transfer it waits for")
	}

	// The first original comes: its reversal posts at once, the others still wait.
	publish(transferCompleted(t, missing[0], 100, "USD"))
	require.Eventually(t, func() bool { return cons.Stats().Released == 1 }, 30*time.Second, 20*time.Millisecond)
	posted, err := b.ledger.EntriesByTransfer(ctx, reversalIDOf(t, reversals[0]))
	require.NoError(t, err)
	require.Len(t, posted, 1)
	row, err := admin.New(b.pool).GetInbox(ctx, "gl:"+reversals[0].ID)
	require.NoError(t, err)
	require.Equal(t, contract.StatusProcessed, row.Status)
	rows, err = admin.New(b.pool).ListInbox(ctx, contract.StatusWaiting, 10)
	require.NoError(t, err)
	require.Len(t, rows, len(missing)-1)

	// An operator gives up on one: it is failed as abandoned, and no longer waits.
	out := inbox.New(events.ConsumerGL, posting.New(b.ledger, log)).Abandon(ctx, b.pool, reversals[1].ID)
	require.Empty(t, out[0].Error)
	row, err = admin.New(b.pool).GetInbox(ctx, "gl:"+reversals[1].ID)
	require.NoError(t, err)
	require.Equal(t, "failed", row.Status)
	require.Equal(t, contract.ReasonAbandoned, row.Reason)
	out = inbox.New(events.ConsumerGL, posting.New(b.ledger, log)).Abandon(ctx, b.pool, reversals[0].ID)
	require.Contains(t, out[0].Error, "only a waiting event is abandoned")
}

func reversalIDOf(t *testing.T, env contract.Envelope) string {
	t.Helper()
	var data contract.TransferReversed
	require.NoError(t, env.DecodeData(&data))
	return data.ReversalID
}
