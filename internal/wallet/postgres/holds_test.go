package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

func placeHold(store *postgres.Store, key, walletID string, amount int64) (wallet.Hold, bool, error) {
	return store.PlaceHold(context.Background(), wallet.HoldRequest{
		IdempotencyKey: key, WalletID: walletID, Amount: amount, ExpiresIn: time.Hour,
	})
}

func capture(store *postgres.Store, key string, id uuid.UUID, to string, amount int64) (wallet.Hold, bool, error) {
	return store.CaptureHold(context.Background(), wallet.CaptureRequest{IdempotencyKey: key, HoldID: id, ToWalletID: to, Amount: amount})
}

func walletOf(t *testing.T, store *postgres.Store, id string) wallet.Wallet {
	t.Helper()
	w, err := store.GetWallet(context.Background(), id)
	require.NoError(t, err)
	return w
}

// eventOf decodes the one outbox row of aggregateID with type eventType into data.
func holdEventOf(t *testing.T, pool *pgxpool.Pool, aggregateID, eventType string, data any) outboxRow {
	t.Helper()
	for _, row := range outboxRows(t, pool, aggregateID) {
		if row.EventType == eventType {
			env, err := contract.DecodeEnvelope(row.Payload)
			require.NoError(t, err)
			require.NoError(t, env.DecodeData(data))
			return row
		}
	}
	t.Fatalf("no %s outbox row for %s", eventType, aggregateID)
	return outboxRow{}
}

// expire moves a hold's expiry into the past, as if its time had come.
func expire(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) {
	t.Helper()
	_, err := pool.Exec(context.Background(), "UPDATE holds SET expires_at = clock_timestamp() - interval '1 second' WHERE id = $1", id)
	require.NoError(t, err)
}

func TestPartialCaptureMovesTheCaptureReleasesTheRestWithBothEvents(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "shop", "USD", false)

	h, replayed, err := placeHold(store, "h-1", "alice", 600)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, wallet.HoldPending, h.Status)
	require.Equal(t, "USD", h.Currency, "the wallet's currency by default")
	a := walletOf(t, store, "alice")
	require.Equal(t, [3]int64{1000, 600, 400}, [3]int64{a.Balance, a.Held, a.Available()})
	var placed contract.HoldPlaced
	holdEventOf(t, bundle.pool, h.ID.String(), contract.TypeHoldPlaced, &placed)
	require.NoError(t, placed.Validate())
	require.Equal(t, int64(600), placed.Amount)

	again, replayed, err := placeHold(store, "h-1", "alice", 600)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, h.ID, again.ID)
	_, _, err = placeHold(store, "h-1", "alice", 601)
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused)

	_, _, err = capture(store, "c-0", h.ID, "shop", 601)
	require.ErrorIs(t, err, wallet.ErrCaptureExceedsHold)

	got, replayed, err := capture(store, "c-1", h.ID, "shop", 250)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, wallet.HoldCaptured, got.Status)
	require.Equal(t, int64(250), got.CapturedAmount)
	require.Equal(t, "shop", got.ToWalletID)
	a = walletOf(t, store, "alice")
	require.Equal(t, [3]int64{750, 0, 750}, [3]int64{a.Balance, a.Held, a.Available()}, "the rest is released")
	require.Equal(t, int64(250), balance(t, store, "shop"))

	tr, err := store.GetTransfer(context.Background(), got.CaptureTransferID)
	require.NoError(t, err)
	require.Equal(t, h.ID, tr.HoldID)
	require.Equal(t, int64(250), tr.Amount)
	var completed contract.TransferCompleted
	holdEventOf(t, bundle.pool, tr.ID.String(), contract.TypeTransferCompletedV2, &completed)
	require.Equal(t, contract.TransferCompleted{
		TransferID: tr.ID.String(), FromWalletID: "alice", ToWalletID: "shop", Amount: 250, Currency: "USD", Kind: contract.KindTransfer, CreatedAt: completed.CreatedAt,
	}, completed)
	var captured contract.HoldCaptured
	holdEventOf(t, bundle.pool, h.ID.String(), contract.TypeHoldCaptured, &captured)
	require.NoError(t, captured.Validate())
	require.Equal(t, contract.HoldCaptured{
		HoldID: h.ID.String(), TransferID: tr.ID.String(), WalletID: "alice", ToWalletID: "shop",
		Amount: 600, CapturedAmount: 250, Currency: "USD", CreatedAt: captured.CreatedAt,
	}, captured)

	replay, replayed, err := capture(store, "c-1", h.ID, "shop", 250)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, got.CaptureTransferID, replay.CaptureTransferID)
	_, _, err = capture(store, "c-2", h.ID, "shop", 1)
	require.ErrorIs(t, err, wallet.ErrHoldNotPending)
	_, err = store.VoidHold(context.Background(), h.ID)
	require.ErrorIs(t, err, wallet.ErrHoldNotPending)
	_, _, err = capture(store, "t-key", uuid.New(), "shop", 1)
	require.ErrorIs(t, err, wallet.ErrHoldNotFound)
}

func TestVoidReleasesTheHoldOnceAndARepeatAnswersTheSame(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	fund(t, store, "alice", "USD", 100)
	h, _, err := placeHold(store, "h-1", "alice", 100)
	require.NoError(t, err)

	v, err := store.VoidHold(context.Background(), h.ID)
	require.NoError(t, err)
	require.Equal(t, wallet.HoldVoided, v.Status)
	require.Equal(t, wallet.VoidRequested, v.VoidReason)
	a := walletOf(t, store, "alice")
	require.Equal(t, [3]int64{100, 0, 100}, [3]int64{a.Balance, a.Held, a.Available()})
	var voided contract.HoldVoided
	holdEventOf(t, bundle.pool, h.ID.String(), contract.TypeHoldVoided, &voided)
	require.NoError(t, voided.Validate())
	require.Equal(t, contract.VoidRequested, voided.Reason)

	again, err := store.VoidHold(context.Background(), h.ID)
	require.NoError(t, err)
	require.Equal(t, v, again)
	require.Len(t, outboxRows(t, bundle.pool, h.ID.String()), 2, "HoldPlaced and one HoldVoided")
	_, _, err = capture(store, "c-1", h.ID, "alice-2", 1)
	require.ErrorIs(t, err, wallet.ErrHoldNotPending)
}

func TestHeldFundsAreNotAvailableToHoldsNorTransfers(t *testing.T) {
	t.Parallel()
	store, _ := setup(t)
	fund(t, store, "alice", "USD", 100)
	createWallet(t, store, "bob", "USD", false)
	_, _, err := placeHold(store, "h-1", "alice", 70)
	require.NoError(t, err)

	_, _, err = placeHold(store, "h-2", "alice", 31)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, _, err = store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "t-1", FromWalletID: "alice", ToWalletID: "bob", Amount: 31, Currency: "USD",
	})
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds, "a transfer spends available, not balance")
	_, _, err = store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "t-2", FromWalletID: "alice", ToWalletID: "bob", Amount: 30, Currency: "USD",
	})
	require.NoError(t, err)
	_, _, err = store.PlaceHold(context.Background(), wallet.HoldRequest{
		IdempotencyKey: "h-3", WalletID: "alice", Amount: 1, Currency: "EUR", ExpiresIn: time.Hour,
	})
	require.ErrorIs(t, err, wallet.ErrCurrencyMismatch)
	_, _, err = placeHold(store, "h-4", "nobody", 1)
	require.ErrorIs(t, err, wallet.ErrWalletNotFound)
	_, _, err = placeHold(store, "h-5", "mint-USD", 1_000_000)
	require.NoError(t, err, "a wallet that may go negative holds beyond its balance")
}

func TestExpiredHoldCannotBeCapturedAndTheWorkerVoidsIt(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	fund(t, store, "alice", "USD", 100)
	createWallet(t, store, "shop", "USD", false)
	h, _, err := placeHold(store, "h-1", "alice", 40)
	require.NoError(t, err)
	expire(t, bundle.pool, h.ID)

	_, _, err = capture(store, "c-1", h.ID, "shop", 0)
	require.ErrorIs(t, err, wallet.ErrHoldExpired, "even before the worker ran")

	worker := postgres.NewHoldExpiry(store, postgres.HoldExpiryConfig{Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx) }()
	require.Eventually(t, func() bool {
		got, err := store.GetHold(context.Background(), h.ID)
		require.NoError(t, err)
		return got.Status == wallet.HoldVoided
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	got, err := store.GetHold(context.Background(), h.ID)
	require.NoError(t, err)
	require.Equal(t, wallet.VoidExpired, got.VoidReason)
	require.Equal(t, int64(0), walletOf(t, store, "alice").Held)
	var voided contract.HoldVoided
	holdEventOf(t, bundle.pool, h.ID.String(), contract.TypeHoldVoided, &voided)
	require.Equal(t, contract.VoidExpired, voided.Reason)
}

func TestConcurrentCaptureAndVoidOfOneHoldExactlyOneWins(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	fund(t, store, "alice", "USD", 1000)
	createWallet(t, store, "shop", "USD", false)
	for i := range 5 {
		h, _, err := placeHold(store, "h-"+string(rune('a'+i)), "alice", 100)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var captureErr, voidErr error
		wg.Add(2)
		go func() { defer wg.Done(); _, _, captureErr = capture(store, "c-"+h.ID.String(), h.ID, "shop", 60) }()
		go func() { defer wg.Done(); _, voidErr = store.VoidHold(context.Background(), h.ID) }()
		wg.Wait()
		require.True(t, (captureErr == nil) != (voidErr == nil), "capture: %v, void: %v", captureErr, voidErr)
		if captureErr != nil {
			require.ErrorIs(t, captureErr, wallet.ErrHoldNotPending)
		} else {
			require.ErrorIs(t, voidErr, wallet.ErrHoldNotPending)
		}
		require.Len(t, outboxRows(t, bundle.pool, h.ID.String()), 2, "HoldPlaced and the winner's event")
	}
	a := walletOf(t, store, "alice")
	require.Equal(t, int64(0), a.Held)
	require.Equal(t, int64(1000), a.Balance+balance(t, store, "shop"))
}

func TestAcknowledgmentsAcknowledgeHoldEventsUnchanged(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 100)
	h, _, err := placeHold(store, "h-1", "alice", 10)
	require.NoError(t, err)
	row := holdEventOf(t, bundle.pool, h.ID.String(), contract.TypeHoldPlaced, &contract.HoldPlaced{})

	handler := postgres.NewAcknowledgments()
	env := postedEnvelope(t, contract.TransferPosted{
		TransferID: h.ID.String(), SourceEventID: row.ID.String(), EntryID: "entry-1", PostedAt: time.Now(),
	})
	require.NoError(t, database.WithTx(ctx, bundle.pool, func(tx pgx.Tx) error { return handler.Handle(ctx, tx, []contract.Envelope{env}) }))
	require.Equal(t, "acknowledged", outboxRows(t, bundle.pool, h.ID.String())[0].Status)
}
