package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// transferOf makes a completed transfer of amount from a funded "alice" to "bob".
func transferOf(t *testing.T, store *postgres.Store, amount int64) wallet.Transfer {
	t.Helper()
	fund(t, store, "alice", "USD", amount)
	createWallet(t, store, "bob", "USD", false)
	tr, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "t-1", FromWalletID: "alice", ToWalletID: "bob", Amount: amount, Currency: "USD",
	})
	require.NoError(t, err)
	return tr
}

func reverse(store *postgres.Store, key string, id uuid.UUID, amount int64) (wallet.Transfer, bool, error) {
	return store.ReverseTransfer(context.Background(), wallet.ReversalRequest{IdempotencyKey: key, TransferID: id, Amount: amount})
}

func TestPartialReversalsMoveMoneyBackWithTheirEventsUpToTheOriginal(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	ctx := context.Background()
	tr := transferOf(t, store, 1000)

	first, replayed, err := reverse(store, "r-1", tr.ID, 300)
	require.NoError(t, err)
	require.False(t, replayed)
	require.Equal(t, tr.ID, first.ReversesTransferID)
	require.Equal(t, "bob", first.FromWalletID, "a reversal moves the money back")
	require.Equal(t, "alice", first.ToWalletID)
	require.Equal(t, int64(300), first.Amount)
	require.Equal(t, "USD", first.Currency)
	require.Equal(t, int64(300), balance(t, store, "alice"))
	require.Equal(t, int64(700), balance(t, store, "bob"))

	rows := outboxRows(t, bundle.pool, first.ID.String())
	require.Len(t, rows, 1, "one event, in the reversal's transaction")
	require.Equal(t, first.EventID, rows[0].ID)
	require.Equal(t, contract.TypeTransferReversed, rows[0].EventType)
	env, err := contract.DecodeEnvelope(rows[0].Payload)
	require.NoError(t, err)
	var data contract.TransferReversed
	require.NoError(t, env.DecodeData(&data))
	require.NoError(t, data.Validate())
	require.Equal(t, contract.TransferReversed{
		ReversalID: first.ID.String(), TransferID: tr.ID.String(), FromWalletID: "bob", ToWalletID: "alice",
		Amount: 300, Currency: "USD", CreatedAt: data.CreatedAt,
	}, data)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(env.Data, &raw))
	require.ElementsMatch(t, []string{"reversal_id", "transfer_id", "from_wallet_id", "to_wallet_id", "amount", "currency", "created_at"}, keys(raw))

	// The rest, in full: the reversals total the original.
	second, _, err := reverse(store, "r-2", tr.ID, 700)
	require.NoError(t, err)
	require.Equal(t, int64(1000), balance(t, store, "alice"))
	require.Equal(t, int64(0), balance(t, store, "bob"))

	_, _, err = reverse(store, "r-3", tr.ID, 1)
	require.ErrorIs(t, err, wallet.ErrReversalExceedsTransfer)

	got, err := store.GetTransfer(ctx, tr.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1000), got.ReversedAmount)
	require.Len(t, got.Reversals, 2)
	require.Equal(t, []uuid.UUID{first.ID, second.ID}, []uuid.UUID{got.Reversals[0].ID, got.Reversals[1].ID})
	listed, err := store.ListReversals(ctx, tr.ID)
	require.NoError(t, err)
	require.Len(t, listed, 2)

	asTransfer, err := store.GetTransfer(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, tr.ID, asTransfer.ReversesTransferID, "a reversal is readable as a transfer of its own")

	_, _, err = reverse(store, "r-4", first.ID, 1)
	require.ErrorIs(t, err, wallet.ErrReversalOfReversal)

	checks, err := postgres.Verify(ctx, bundle.pool, wallet.VerifyOptions{})
	require.NoError(t, err)
	for _, c := range checks {
		require.Zero(t, c.Failed, "%s: %v", c.Name, c.Sample)
	}
}

func TestRefusedReversalsLeaveNoTrace(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	tr := transferOf(t, store, 100)

	tests := []struct {
		name string
		id   uuid.UUID
		amt  int64
		want error
	}{
		{"a transfer that does not exist is not found", uuid.New(), 1, wallet.ErrTransferNotFound},
		{"more than the original exceeds it", tr.ID, 101, wallet.ErrReversalExceedsTransfer},
		{"a zero amount is invalid", tr.ID, 0, wallet.ErrInvalid},
	}
	for i, tt := range tests {
		_, _, err := reverse(store, fmt.Sprintf("refused-%d", i), tt.id, tt.amt)
		require.ErrorIs(t, err, tt.want, tt.name)
	}

	// The receiver spent the money: it must hold the amount, unless it may go negative.
	createWallet(t, store, "carol", "USD", false)
	_, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
		IdempotencyKey: "spend", FromWalletID: "bob", ToWalletID: "carol", Amount: 60, Currency: "USD",
	})
	require.NoError(t, err)
	_, _, err = reverse(store, "refused", tr.ID, 50)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)

	require.Equal(t, 2, count(t, bundle.pool, "transfers")-1, "the funding, the transfer and the spending only")
	// The refusal is kept under its key; another key reverses.
	_, _, err = reverse(store, "refused", tr.ID, 40)
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused)
	r, _, err := reverse(store, "accepted", tr.ID, 40)
	require.NoError(t, err)
	require.Equal(t, int64(40), r.Amount)
}

func TestReversalReplaysPerIdempotencyKey(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	tr := transferOf(t, store, 100)

	first, replayed, err := reverse(store, "r", tr.ID, 10)
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := reverse(store, "r", tr.ID, 10)
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, int64(90), balance(t, store, "bob"), "the money moved once")
	require.Len(t, outboxRows(t, bundle.pool, first.ID.String()), 1)

	_, _, err = reverse(store, "r", tr.ID, 11)
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused, "the same key with another body")
	_, _, err = reverse(store, "t-1", tr.ID, 10)
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused, "a transfer's key")
}

func TestConcurrentReversalsCannotExceedTheOriginal(t *testing.T) {
	t.Parallel()
	store, bundle := setup(t)
	tr := transferOf(t, store, 100)

	// Two reversals of 60 at once: exactly one fits.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			_, _, errs[i] = reverse(store, []string{"a", "b"}[i], tr.ID, 60)
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, wallet.ErrReversalExceedsTransfer):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, ok)
	got, err := store.GetTransfer(context.Background(), tr.ID)
	require.NoError(t, err)
	require.Equal(t, int64(60), got.ReversedAmount)
	require.Equal(t, int64(40), balance(t, store, "bob"))

	// The database refuses a total beyond the amount whoever writes it.
	_, err = bundle.pool.Exec(context.Background(), "UPDATE transfers SET reversed_amount = amount + 1 WHERE id = $1", tr.ID)
	require.ErrorContains(t, err, "transfers_reversed_within_amount")
}
