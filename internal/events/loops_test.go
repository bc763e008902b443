package events_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
)

// overlapHandler holds each batch for a while and records how many batches it held at once.
type overlapHandler struct {
	hold     time.Duration
	inFlight atomic.Int32
	most     atomic.Int32
	events   atomic.Int32
}

func (h *overlapHandler) Handle(ctx context.Context, _ pgx.Tx, envs []events.Envelope) error {
	n := h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	for {
		most := h.most.Load()
		if n <= most || h.most.CompareAndSwap(most, n) {
			break
		}
	}
	h.events.Add(int32(len(envs)))
	select {
	case <-time.After(h.hold):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A backlog is worked by both of the consumer's loops at once.
func TestTheConsumersSecondLoopTakesPartInABacklog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.addEvents(t, 500)
	_, err := b.relay(t, events.RelayConfig{BatchSize: 500}).DispatchOnce(ctx)
	require.NoError(t, err)

	h := &overlapHandler{hold: 50 * time.Millisecond}
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
	relay := b.relay(t, events.RelayConfig{})
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
