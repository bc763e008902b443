package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// allOutbox is every outbox row, in id order.
func allOutbox(t *testing.T, pool *pgxpool.Pool) []outboxRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT id, event_type, aggregate_id, payload, status FROM outbox ORDER BY id")
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[outboxRow])
	require.NoError(t, err)
	return out
}

// movements makes a deposit, a transfer with a reference, its partial reversal, a hold captured
// in part and a hold voided: every kind of event the wallet writes.
func movements(t *testing.T, store *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "bob", "USD", false)
	tr, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "t-1", FromWalletID: "alice", ToWalletID: "bob", Amount: 300, Currency: "USD", Reference: "invoice 7",
	})
	require.NoError(t, err)
	_, _, err = store.ReverseTransfer(ctx, wallet.ReversalRequest{IdempotencyKey: "r-1", TransferID: tr.ID, Amount: 100})
	require.NoError(t, err)
	h, _, err := placeHold(store, "h-1", "alice", 200)
	require.NoError(t, err)
	_, _, err = capture(store, "c-1", h.ID, "bob", 150)
	require.NoError(t, err)
	h, _, err = placeHold(store, "h-2", "alice", 50)
	require.NoError(t, err)
	_, err = store.VoidHold(ctx, h.ID)
	require.NoError(t, err)
}

func TestRebuiltEventsAreTheEventsFirstWrittenUnderTheirIDs(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	since := time.Now().Add(-time.Minute)
	movements(t, store)

	first := allOutbox(t, bundle.pool)
	require.Len(t, first, 8, "a deposit, a transfer, a reversal, 2 holds placed, a capture's transfer, a hold captured, one voided")
	// The capture's transfer event is still on its way; the others were acknowledged, and
	// retention deleted all of those but the reversal's and the voided hold's.
	var onItsWay uuid.UUID
	require.NoError(t, bundle.pool.QueryRow(ctx, "SELECT event_id FROM transfers WHERE hold_id IS NOT NULL").Scan(&onItsWay))
	_, err := bundle.pool.Exec(ctx, "UPDATE outbox SET status = 'acknowledged', acknowledged_at = now() WHERE id <> $1", onItsWay)
	require.NoError(t, err)
	_, err = bundle.pool.Exec(ctx, "DELETE FROM outbox WHERE status = 'acknowledged' AND event_type NOT IN ($1, $2)",
		contract.TypeTransferReversed, contract.TypeHoldVoided)
	require.NoError(t, err)
	require.Len(t, allOutbox(t, bundle.pool), 3)

	out, err := store.RebuildEvents(ctx, wallet.RebuildRequest{Since: since, EventType: contract.TypeTransferCompletedV2, BatchSize: 2})
	require.NoError(t, err)
	require.Equal(t, int64(8), out.Events)
	require.Equal(t, 4, out.Batches, "4 batches of 2")
	require.Equal(t, map[string]int64{
		contract.TypeTransferCompletedV2: 3, contract.TypeTransferReversed: 1,
		contract.TypeHoldPlaced: 2, contract.TypeHoldCaptured: 1, contract.TypeHoldVoided: 1,
	}, out.ByType)
	require.Equal(t, [3]int64{5, 2, 1}, [3]int64{out.Created, out.Republished, out.Left},
		"deleted rows re-created, acknowledged ones back to pending, the pending one left alone")

	rebuilt := allOutbox(t, bundle.pool)
	require.Len(t, rebuilt, len(first))
	for i, row := range rebuilt {
		require.Equal(t, "pending", row.Status, row.ID)
		require.Equal(t, first[i].ID, row.ID)
		require.Equal(t, first[i].EventType, row.EventType)
		require.Equal(t, first[i].AggregateID, row.AggregateID)
		require.JSONEq(t, string(first[i].Payload), string(row.Payload), "%s %s", row.EventType, row.ID)
	}

	again, err := store.RebuildEvents(ctx, wallet.RebuildRequest{Since: since, EventType: contract.TypeTransferCompletedV2})
	require.NoError(t, err)
	require.Equal(t, [4]int64{8, 0, 0, 8}, [4]int64{again.Events, again.Created, again.Republished, again.Left}, "a second run changes nothing")
	require.Len(t, allOutbox(t, bundle.pool), len(first))
}

func TestARebuildTakesOnlyThePeriodAndRefusesABadRequest(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Minute)
	movements(t, store)
	after := time.Now().Add(time.Minute)

	out, err := store.RebuildEvents(ctx, wallet.RebuildRequest{Since: before.Add(-time.Hour), Until: before, EventType: contract.TypeTransferCompletedV2})
	require.NoError(t, err)
	require.Equal(t, int64(0), out.Events)
	out, err = store.RebuildEvents(ctx, wallet.RebuildRequest{Since: after, EventType: contract.TypeTransferCompletedV2})
	require.NoError(t, err)
	require.Equal(t, int64(0), out.Events)

	_, err = bundle.pool.Exec(ctx, "DELETE FROM outbox")
	require.NoError(t, err)
	out, err = store.RebuildEvents(ctx, wallet.RebuildRequest{Since: before, EventType: contract.TypeTransferCompleted})
	require.NoError(t, err)
	require.Equal(t, int64(8), out.Created)
	require.Equal(t, int64(1), out.ByType[contract.TypeTransferCompleted], "v1 carries the deposit alone")
	require.Equal(t, int64(2), out.ByType[contract.TypeTransferCompletedV2], "the transfer and the capture go as v2")

	for name, req := range map[string]wallet.RebuildRequest{
		"no start":           {EventType: contract.TypeTransferCompletedV2},
		"an end before":      {Since: after, Until: before, EventType: contract.TypeTransferCompletedV2},
		"an unknown version": {Since: before, EventType: "TransferCompleted.v9"},
		"a batch too large":  {Since: before, EventType: contract.TypeTransferCompletedV2, BatchSize: wallet.MaxRebuildBatchSize + 1},
	} {
		_, err := store.RebuildEvents(ctx, req)
		require.Error(t, err, name)
	}
}
