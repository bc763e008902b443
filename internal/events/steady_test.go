package events_test

// The pipeline at steady state, for as long as it runs: a stream that fills up, a consumer that
// is away, rows the stream no longer holds, settings an operator changed.

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
)

func (b *testBundle) streamState(t *testing.T, source string) jetstream.StreamState {
	t.Helper()
	s, err := b.js.Stream(context.Background(), b.topo.StreamName(source))
	require.NoError(t, err)
	return s.CachedInfo().State
}

func TestAFullStreamNeverHaltsThePipelineAndUnreadEventsWaitInTheOutbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const limit = 1 << 20
	b.topo.MaxBytes = limit // lower than the stream's: set on the stream as an operator would
	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.MaxBytes = limit })
	const n = 4000 // about three times what the stream holds
	b.addEvents(t, n)
	relay := b.relay(t, outbox.RelayConfig{PollInterval: 100 * time.Millisecond, AckTimeout: time.Second})
	stopRelay := runRelay(t, relay)
	defer stopRelay()

	// The consumer is away: the relay publishes until the unread events fill their share of
	// the stream and holds the rest back in the outbox, pushing nothing unread out.
	var last uint64
	require.Eventually(t, func() bool {
		st := b.streamState(t, contract.SourceWallet)
		steady := st.Msgs > 0 && st.Msgs == last
		last = st.Msgs
		t.Logf("stream: %d messages, %d bytes; outbox %v", st.Msgs, st.Bytes, b.statusCounts(t))
		return steady && b.statusCounts(t)["pending"] > 0
	}, 60*time.Second, 1500*time.Millisecond, "the relay holds rows back")
	st := b.streamState(t, contract.SourceWallet)
	require.Equal(t, uint64(1), st.FirstSeq, "no unread event left the stream")
	require.LessOrEqual(t, st.Bytes, uint64(limit*outbox.UnreadShare)+64<<10, "the unread events fill about their share")

	// The consumer comes back: every event reaches it once, through a stream that drops what
	// was read to take the rest, and nothing is published twice.
	var handled atomic.Int64
	cons := b.consumer(t, "gl", inbox.HandlerFunc(func(context.Context, pgx.Tx, contract.Envelope) error {
		handled.Add(1)
		return nil
	}))
	stopConsumer := runInBackground(t, cons.Run)
	defer stopConsumer()
	require.Eventually(t, func() bool { return handled.Load() == n }, 3*time.Minute, 100*time.Millisecond)
	require.Equal(t, map[string]int64{"dispatched": n}, b.statusCounts(t))
	require.Greater(t, b.streamState(t, contract.SourceWallet).FirstSeq, uint64(1), "the full stream dropped events that were read")
	require.Zero(t, relay.Stats().Republished, "no event left the stream unread")
	require.Zero(t, cons.Stats().Duplicates)
	require.Zero(t, cons.Stats().Failed)
}

func TestRowsTheStreamNoLongerHoldsNeverHideTheRowsAboveThemFromTheAckFloor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	relay := b.glRelay(t, outbox.RelayConfig{BatchSize: 1000})
	dispatchAll := func() {
		for {
			n, err := relay.DispatchOnce(ctx)
			require.NoError(t, err)
			if n == 0 {
				return
			}
		}
	}
	b.addAcks(t, 1010) // more than one acknowledgment round lists
	dispatchAll()
	cons, err := b.topo.EnsureConsumer(ctx, b.js, walletSpec)
	require.NoError(t, err)
	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceGL))
	require.NoError(t, err)
	// Purged unread, inside the duplicate window: none of them can be published again yet.
	require.NoError(t, stream.Purge(ctx))
	fresh := b.addAcks(t, 5)
	dispatchAll()
	ackAll(t, cons, 5)

	require.Eventually(t, func() bool {
		_, err := relay.AcknowledgeAppliedOnce(ctx)
		require.NoError(t, err)
		return b.statusCounts(t)["acknowledged"] == 5
	}, 30*time.Second, 10*time.Millisecond, "the rows the consumer read are acknowledged")
	for _, id := range fresh {
		require.Equal(t, "acknowledged", b.outboxStatus(t, id).Status)
	}
}

func TestStartUpKeepsADuplicateWindowAnOperatorRaisedAndSaysWhatItResets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var logged bytes.Buffer
	b.topo.Log = zerolog.New(&logged)
	window := func() time.Duration {
		s, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
		require.NoError(t, err)
		return s.CachedInfo().Config.Duplicates
	}

	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.Duplicates = 10 * time.Minute })
	require.NoError(t, b.topo.EnsureStreams(ctx, b.js))
	require.Equal(t, 10*time.Minute, window(), "a raised window is kept")
	require.Contains(t, logged.String(), "keeping the stream's limit raised by an operator")

	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.Duplicates = 30 * time.Second })
	logged.Reset()
	require.NoError(t, b.topo.EnsureStreams(ctx, b.js))
	require.Equal(t, events.DefaultDuplicateWindow, window(), "a lowered window is set back to the configuration ...")
	require.Contains(t, logged.String(), `"setting":"duplicate_window"`, "... and said")
	require.Contains(t, logged.String(), "setting the stream's configuration over its running value")
}
