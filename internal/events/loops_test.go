package events_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/outbox"
)

// overlapHandler holds each batch for a while and records how many batches it held at once.
type overlapHandler struct {
	hold time.Duration
	// overlapped, when set, is closed once two batches are held at once, and each batch is first
	// held until then, for at most untilOverlap: a loop that takes part is seen however late the
	// machine schedules it.
	overlapped   chan struct{}
	untilOverlap time.Duration
	closeOnce    sync.Once
	inFlight     atomic.Int32
	most         atomic.Int32
	events       atomic.Int32
}

func (h *overlapHandler) Handle(ctx context.Context, _ pgx.Tx, envs []contract.Envelope) error {
	n := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	for {
		most := h.most.Load()
		if n <= most || h.most.CompareAndSwap(most, n) {
			break
		}
	}
	h.events.Add(int32(len(envs)))
	if n >= 2 && h.overlapped != nil {
		h.closeOnce.Do(func() { close(h.overlapped) })
	}
	if err := h.awaitOverlap(ctx); err != nil {
		return err
	}
	select {
	case <-time.After(h.hold):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitOverlap waits until two batches have been held at once, or untilOverlap has passed.
func (h *overlapHandler) awaitOverlap(ctx context.Context) error {
	if h.overlapped == nil {
		return nil
	}
	deadline := time.NewTimer(h.untilOverlap)
	defer deadline.Stop()
	select {
	case <-h.overlapped:
	case <-deadline.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// A backlog is worked by both of the consumer's loops at once. The first batch waits (up to
// 3 s) for the second loop's, so the test does not depend on the second loop fetching within
// the other's 50 ms on a loaded machine (it did not, once, under -race in CI); a second loop
// that never takes part still fails it.
func TestTheConsumersSecondLoopTakesPartInABacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.addEvents(t, 500)
	_, err := b.relay(t, outbox.RelayConfig{BatchSize: 500}).DispatchOnce(ctx)
	require.NoError(t, err)

	h := &overlapHandler{hold: 50 * time.Millisecond, overlapped: make(chan struct{}), untilOverlap: 3 * time.Second}
	cons := b.consumer(t, "gl", h) // two loops, batches of 100
	runInBackground(t, cons.Run)
	require.Eventually(t, func() bool { return cons.Stats().Processed == 500 }, 30*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 2, h.most.Load(), "with events waiting, the two loops hold batches at once")
}

// Caught up, the second loop stays out: events that come one by one, faster than a batch is
// handled, wait for the first loop and go together instead of being split between the two.
func TestACaughtUpConsumerTakesATrickleWithOneLoop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := &overlapHandler{hold: 30 * time.Millisecond}
	cons := b.consumer(t, "gl", h)
	runInBackground(t, cons.Run)
	relay := b.relay(t, outbox.RelayConfig{})
	const n = 40
	for range n {
		b.addEvents(t, 1)
		_, err := relay.DispatchOnce(ctx)
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return cons.Stats().Processed == n }, 30*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, h.most.Load(), "one loop held every batch")
}

// A consumer that keeps up sends the broker one pull request per event that comes alone: it
// waits for the first at once, and asks for more only when that one counts more pending after
// it (before, each such event cost three: what waits, the wait, and what came with it).
func TestACaughtUpConsumerAsksTheBrokerOncePerLoneEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var requests atomic.Int32
	stream := b.topo.StreamName(contract.SourceWallet)
	sub, err := b.nc.Subscribe("$JS.API.CONSUMER.MSG.NEXT."+stream+".gl", func(*nats.Msg) { requests.Add(1) })
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, b.nc.Flush())

	cons := b.consumer(t, "gl", &overlapHandler{})
	runInBackground(t, cons.Run)
	require.Eventually(t, func() bool { return requests.Load() > 0 }, 10*time.Second, 5*time.Millisecond, "the consumer waits for events")
	relay := b.relay(t, outbox.RelayConfig{})
	const n = 10
	for i := range n {
		b.addEvents(t, 1)
		_, err := relay.DispatchOnce(ctx)
		require.NoError(t, err)
		require.Eventually(t, func() bool { return cons.Stats().Processed == int64(i+1) }, 10*time.Second, 2*time.Millisecond)
	}
	// One request per event, the one waiting when the run began, and one per loop for every
	// second the run took (a wait that expired).
	require.LessOrEqual(t, int(requests.Load()), n+1+4, "pull requests for %d lone events", n)
}

// A batch is acknowledged with plain acks and one double ack of its last event: every event
// of it is acknowledged at the broker, not only the confirmed one, by the time the consumer
// has stopped (its loops wait for their batch's confirmation). Events left unacknowledged
// would stay pending for the 30-s ack wait and be delivered again.
func TestEveryEventOfABatchIsAcknowledgedAtTheBroker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n = 250
	b.addEvents(t, n)
	_, err := b.relay(t, outbox.RelayConfig{BatchSize: n}).DispatchOnce(ctx)
	require.NoError(t, err)

	cons := b.consumer(t, "gl", &overlapHandler{}) // batches of 100: 100, 100, 50, or smaller
	stop := runInBackground(t, cons.Run)
	require.Eventually(t, func() bool { return cons.Stats().Processed == n }, 30*time.Second, 10*time.Millisecond)
	stop()

	durable, err := b.js.Consumer(ctx, b.topo.StreamName(contract.SourceWallet), "gl")
	require.NoError(t, err)
	info, err := durable.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.NumAckPending, "events delivered and not acknowledged")
	require.EqualValues(t, n, info.AckFloor.Consumer, "the ack floor is past every event")
	require.Zero(t, info.NumRedelivered)
}
