package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
)

// runRelay runs r until the test ends, once r has checked the broker's streams (as its first
// round does at start-up). The stop it returns ends r's Run sooner and waits for it.
func runRelay(t *testing.T, r *outbox.Relay) (stop func()) {
	t.Helper()
	stop = runInBackground(t, r.Run)
	_, err := r.DispatchOnce(t.Context())
	require.NoError(t, err)
	return stop
}

// writeEvents writes n events through outbox in one WithTx transaction that commits, or rolls
// back when fail is set; it returns the ids and the status the outbox wrote.
func (b *testBundle) writeEvents(t *testing.T, box *outbox.Outbox, n int, fail bool) ([]uuid.UUID, string) {
	t.Helper()
	ctx := context.Background()
	ids := make([]uuid.UUID, n)
	evs := make([]outbox.Event, n)
	for i := range evs {
		ids[i] = uuid.Must(uuid.NewV7())
		evs[i] = outbox.Event{ID: ids[i], Type: contract.TypeTransferCompleted, AggregateID: uuid.NewString(), Time: time.Now(),
			Data: contract.TransferCompleted{TransferID: uuid.NewString(), FromWalletID: "a", ToWalletID: "b", Amount: 1, Currency: "USD", CreatedAt: time.Now()}}
	}
	var status string
	rollback := errors.New("the business change failed")
	err := database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		if status, err = box.AddBatch(ctx, tx, evs); err != nil {
			return err
		}
		if fail {
			return rollback
		}
		return nil
	})
	if fail {
		require.ErrorIs(t, err, rollback)
	} else {
		require.NoError(t, err)
	}
	return ids, status
}

func TestPublishOnCommitPublishesCommittedRowsWithoutAClaimAndRolledBackOnesNever(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// No poll and no catch-up within the test: only the hand-off can publish.
	r := b.relay(t, outbox.RelayConfig{PollInterval: time.Hour})
	runRelay(t, r)
	box := outbox.New(contract.SourceWallet).PublishOnCommit(r)

	_, _ = b.writeEvents(t, box, 5, true)
	ids, status := b.writeEvents(t, box, 5, false)
	require.Equal(t, contract.StatusDispatching, status, "written claimed by this process's relay")

	other := b.relay(t, outbox.RelayConfig{})
	n, err := other.DispatchOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "another relay does not claim rows under the writer's lease")

	require.Eventually(t, func() bool { return b.statusCounts(t)["dispatched"] == 5 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, map[string]int64{"dispatched": 5}, b.statusCounts(t), "the rolled-back rows do not exist")
	require.Equal(t, uint64(5), b.streamMessages(t), "nothing of the rolled-back transaction was published")
	for _, id := range ids {
		row, err := eventsdb.New(b.pool).GetOutbox(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, int32(1), row.Attempts)
		require.Equal(t, int32(1), row.PublishCount)
		require.Nil(t, row.LeaseOwner)
	}
	require.Equal(t, outbox.RelayStats{Published: 5}, r.Stats())
}

func TestPublishOnCommitWritesPendingOutsideAWithTxTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.relay(t, outbox.RelayConfig{PollInterval: time.Hour})
	runRelay(t, r)
	box := outbox.New(contract.SourceWallet).PublishOnCommit(r)
	// A statement on the pool has no commit to wait for, and a savepoint may still be rolled
	// back: neither can hand its rows over.
	status, err := box.Add(context.Background(), b.pool, outbox.Event{ID: uuid.Must(uuid.NewV7()),
		Type: contract.TypeTransferCompleted, AggregateID: "t1", Time: time.Now(), Data: map[string]int{"n": 1}})
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, status)
	err = database.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		sp, err := tx.Begin(context.Background())
		if err != nil {
			return err
		}
		status, err = box.Add(context.Background(), sp, outbox.Event{ID: uuid.Must(uuid.NewV7()),
			Type: contract.TypeTransferCompleted, AggregateID: "t2", Time: time.Now(), Data: map[string]int{"n": 2}})
		if err != nil {
			return err
		}
		return sp.Commit(context.Background())
	})
	require.NoError(t, err)
	require.Equal(t, contract.StatusPending, status)
	// The NOTIFY of the pending rows wakes the relay's claim.
	require.Eventually(t, func() bool { return b.statusCounts(t)["dispatched"] == 2 }, 5*time.Second, 10*time.Millisecond)
}

func TestRowsHandedToARelayThatDiedArePublishedWhenTheirLeaseRunsOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// A process wrote rows claimed by its relay and died before publishing them.
	ids := []uuid.UUID{uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())}
	n, err := eventsdb.New(b.pool).InsertOutboxBatchClaimed(ctx, eventsdb.InsertOutboxBatchClaimedParams{
		Ids: ids, EventTypes: []string{contract.TypeTransferCompleted, contract.TypeTransferCompleted},
		AggregateIds: []string{"t1", "t2"}, Payloads: []json.RawMessage{json.RawMessage(`{"n":1}`), json.RawMessage(`{"n":2}`)},
		Owner: "dead-process", LeaseSeconds: 0.5,
	})
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	b.takeOverAfterLease(t, 2)
}

func TestPublishOnCommitWritesPendingWhileTheBrokerIsDown(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	broker := envtest.StartBroker(t)
	b := setupWithNATS(t, pool, broker.URL())
	r := b.relay(t, outbox.RelayConfig{PollInterval: 200 * time.Millisecond})
	runRelay(t, r)
	box := outbox.New(contract.SourceWallet).PublishOnCommit(r)

	broker.Shutdown()
	require.Eventually(t, func() bool { return events.Healthy(b.nc) != nil }, 5*time.Second, 10*time.Millisecond)
	_, status := b.writeEvents(t, box, 10, false)
	require.Equal(t, contract.StatusPending, status, "no hand-off to a relay that cannot publish")
	require.Equal(t, map[string]int64{"pending": 10}, b.statusCounts(t))

	broker.Restart()
	require.Eventually(t, func() bool { return b.statusCounts(t)["dispatched"] == 10 }, 15*time.Second, 50*time.Millisecond)
	_, status = b.writeEvents(t, box, 10, false)
	require.Equal(t, contract.StatusDispatching, status, "handed off again once the broker is back")
	require.Eventually(t, func() bool { return b.statusCounts(t)["dispatched"] == 20 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, uint64(20), b.streamMessages(t))
}
