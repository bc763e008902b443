package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
)

// pullConsumer is the gl durable's consumer with one loop (the standing pull alone) and an ack
// wait of a minute, so that an event released only by the ack wait shows.
func (b *testBundle) pullConsumer(t *testing.T, h inbox.Handler) *inbox.Consumer {
	t.Helper()
	c, err := inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: events.ConsumerGL, Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted,
			AckWait: time.Minute},
		BatchSize: 50, Workers: 1, RetryDelay: 50 * time.Millisecond, Trust: b.keys.Trust,
	}, b.topo, b.nc, b.pool, h, b.log)
	require.NoError(t, err)
	return c
}

func (b *testBundle) durableInfo(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	cons, err := b.js.Consumer(context.Background(), b.topo.StreamName(contract.SourceWallet), events.ConsumerGL)
	require.NoError(t, err)
	info, err := cons.Info(context.Background())
	require.NoError(t, err)
	return info
}

// A loop stopped while its standing pull holds events it has not taken hands them back to the
// broker: another consumer on the same durable gets each of them well inside the ack wait (a
// minute), which alone would release them otherwise. Handed back with a plain nak, the first
// of them waited for the ack wait every time (handBackDelay).
func TestAStoppedLoopHandsBackTheEventsItHeldBeforeTheAckWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	relay := b.relay(t, outbox.RelayConfig{})
	holding, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	held := inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error {
		first.Do(func() { close(holding); <-release })
		return nil
	})
	a := b.pullConsumer(t, held)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()

	b.addEvents(t, 1)
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)
	select {
	case <-holding:
	case <-time.After(20 * time.Second):
		t.Fatal("the first event never reached the handler")
	}
	later := b.addEvents(t, 20)
	_, err = relay.DispatchOnce(ctx)
	require.NoError(t, err)
	// All 21 were delivered to the stopped loop's pull: nothing waits at the broker.
	require.Eventually(t, func() bool {
		info := b.durableInfo(t)
		return info.NumPending == 0 && info.NumAckPending == 21
	}, 20*time.Second, 20*time.Millisecond)

	cancel() // before the held batch ends, so the loop takes nothing more
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, int64(1), a.Stats().Processed)

	// Each of the 20 reaches the next consumer's handler (committed), long before the ack wait.
	var handled sync.Map
	next := b.pullConsumer(t, inbox.HandlerFunc(func(_ context.Context, _ pgx.Tx, env contract.Envelope) error {
		handled.Store(env.ID, true)
		return nil
	}))
	stop := runInBackground(t, next.Run)
	require.Eventually(t, func() bool {
		for _, id := range later {
			if _, ok := handled.Load(id.String()); !ok {
				return false
			}
		}
		return true
	}, 15*time.Second, 20*time.Millisecond, "the held events came back only with the ack wait")
	stop()
}

// The broker deletes the durable consumer under a standing pull: the loop starts again on a
// consumer it ensures anew and takes the events published after.
func TestTheStandingPullComesBackWhenTheBrokerDeletesTheConsumer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	relay := b.relay(t, outbox.RelayConfig{})
	c := b.pullConsumer(t, inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error { return nil }))
	stop := runInBackground(t, c.Run)

	b.addEvents(t, 3)
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.Stats().Processed == 3 }, 20*time.Second, 20*time.Millisecond)

	require.NoError(t, b.js.DeleteConsumer(ctx, b.topo.StreamName(contract.SourceWallet), events.ConsumerGL))
	b.addEvents(t, 4)
	_, err = relay.DispatchOnce(ctx)
	require.NoError(t, err)
	// A consumer created anew starts after what the stream holds already (DeliverNew) or at its
	// start (DeliverAll); either way the inbox applies each event once.
	require.Eventually(t, func() bool { return c.Stats().Processed == 7 }, 30*time.Second, 20*time.Millisecond)
	stop()
}
