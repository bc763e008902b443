package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
)

// requirePublishRecorded checks that the row with id records one publish whose stream
// sequence is the message the stream stores with id as its Nats-Msg-Id, in status.
func (b *testBundle) requirePublishRecorded(t *testing.T, id uuid.UUID, status string) eventsdb.Outbox {
	t.Helper()
	ctx := context.Background()
	row, err := eventsdb.New(b.pool).GetOutbox(ctx, id)
	require.NoError(t, err)
	require.Equal(t, status, row.Status, "row %s", id)
	require.Equal(t, int32(1), row.PublishCount, "row %s: published once, counted once", id)
	require.NotNil(t, row.DispatchedAt, "row %s", id)
	require.NotNil(t, row.StreamSeq, "row %s", id)
	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	msg, err := stream.GetMsg(ctx, uint64(*row.StreamSeq))
	require.NoError(t, err)
	require.Equal(t, id.String(), msg.Header.Get(jetstream.MsgIDHeader), "row %s: its stream_seq is its own message", id)
	require.False(t, row.DispatchedAt.After(time.Now()), "row %s: dispatched_at is the PubAck's time", id)
	return row
}

func (b *testBundle) acknowledgeThrough(t *testing.T, a interface {
	Acknowledge(context.Context, database.Executor, ...uuid.UUID) (int64, error)
}, ids []uuid.UUID, rollback bool) {
	t.Helper()
	errRollback := errors.New("the consumer's transaction failed")
	err := database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		n, err := a.Acknowledge(context.Background(), tx, ids...)
		if err != nil {
			return err
		}
		require.Equal(t, int64(len(ids)), n)
		if rollback {
			return errRollback
		}
		return nil
	})
	if rollback {
		require.ErrorIs(t, err, errRollback)
		return
	}
	require.NoError(t, err)
}

func TestAHeldMarkIsWrittenByTheAcknowledgmentAndTheRestAtStop(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A delay longer than the test: only an acknowledgment or the stop can write a mark.
	r := b.relay(t, outbox.RelayConfig{PollInterval: time.Hour, MarkDelay: 15 * time.Second})
	stop := runRelay(t, r)
	ids, status := b.writeEvents(t, outbox.New(contract.SourceWallet).PublishOnCommit(r), 5, false)
	require.Equal(t, contract.StatusDispatching, status)
	require.Eventually(t, func() bool { return b.streamMessages(t) == 5 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return r.Stats().Published == 5 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, map[string]int64{"dispatching": 5}, b.statusCounts(t), "published, the marks held")

	// An acknowledgment that rolls back writes nothing and leaves the marks held.
	b.acknowledgeThrough(t, r, ids[:3], true)
	require.Equal(t, map[string]int64{"dispatching": 5}, b.statusCounts(t))
	b.acknowledgeThrough(t, r, ids[:3], false)
	require.Equal(t, map[string]int64{"acknowledged": 3, "dispatching": 2}, b.statusCounts(t))
	for _, id := range ids[:3] {
		row := b.requirePublishRecorded(t, id, "acknowledged")
		require.Nil(t, row.LeaseOwner)
		require.False(t, row.DispatchedAt.After(*row.AcknowledgedAt))
	}

	stop()
	require.Equal(t, map[string]int64{"acknowledged": 3, "dispatched": 2}, b.statusCounts(t), "a stopping relay marks what it holds")
	for i, id := range ids {
		want := "acknowledged"
		if i >= 3 {
			want = "dispatched"
		}
		b.requirePublishRecorded(t, id, want)
	}
}

func TestAHeldMarkIsWrittenWhenItsDelayRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.relay(t, outbox.RelayConfig{PollInterval: time.Hour, MarkDelay: 100 * time.Millisecond})
	runRelay(t, r)
	ids, _ := b.writeEvents(t, outbox.New(contract.SourceWallet).PublishOnCommit(r), 4, false)
	require.Eventually(t, func() bool { return b.statusCounts(t)["dispatched"] == 4 }, 5*time.Second, 10*time.Millisecond)
	for _, id := range ids {
		row := b.requirePublishRecorded(t, id, "dispatched")
		require.Nil(t, row.LeaseOwner)
	}
}

func TestClaimedRowsAreMarkedAtOnceWhateverTheMarkDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Held, a claimed row would stay in the claim's index (pending, dispatching, failed), which
	// every later claim of a backlog walks through.
	r := b.relay(t, outbox.RelayConfig{PollInterval: time.Hour, MarkDelay: 15 * time.Second})
	ids := b.addEvents(t, 4) // pending: claimed by a round, not handed off
	n, err := r.DispatchOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, map[string]int64{"dispatched": 4}, b.statusCounts(t))
	for _, id := range ids {
		b.requirePublishRecorded(t, id, "dispatched")
	}
}

func TestAHeldPublishIsRecordedOnARowAcknowledgedWithoutIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.relay(t, outbox.RelayConfig{PollInterval: time.Hour, MarkDelay: 300 * time.Millisecond})
	stop := runRelay(t, r)
	ids, _ := b.writeEvents(t, outbox.New(contract.SourceWallet).PublishOnCommit(r), 3, false)
	require.Eventually(t, func() bool { return r.Stats().Published == 3 }, 5*time.Second, 10*time.Millisecond)
	// Acknowledged by a consumer that does not run beside this relay (another replica's).
	b.acknowledgeThrough(t, outbox.New(contract.SourceWallet), ids, false)
	row, err := eventsdb.New(b.pool).GetOutbox(context.Background(), ids[0])
	require.NoError(t, err)
	require.Nil(t, row.DispatchedAt, "acknowledged before the mark, without the publish's details")

	require.Eventually(t, func() bool {
		row, err := eventsdb.New(b.pool).GetOutbox(context.Background(), ids[2])
		require.NoError(t, err)
		return row.DispatchedAt != nil
	}, 5*time.Second, 10*time.Millisecond, "the delay ran out and the relay recorded its publish")
	stop()
	for _, id := range ids {
		b.requirePublishRecorded(t, id, "acknowledged")
	}
}

func TestARelayRefusesAMarkDelayItsLeaseCannotCover(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := outbox.NewRelay(outbox.RelayConfig{Source: contract.SourceWallet, Lease: 10 * time.Second, MarkDelay: 6 * time.Second},
		b.topo, b.pool, b.nc, b.log)
	require.ErrorContains(t, err, "EVENTS_MARK_DELAY must be between 0 and half of EVENTS_LEASE and EVENTS_ACK_TIMEOUT (5s), got 6s")
}
