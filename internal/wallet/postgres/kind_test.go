package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events/contract"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// eventOf decodes the one TransferCompleted event of transfer id from the outbox.
func eventOf(t *testing.T, b *testBundle, id string) (string, contract.TransferCompleted) {
	t.Helper()
	rows := outboxRows(t, b.pool, id)
	require.Len(t, rows, 1)
	env, err := contract.DecodeEnvelope(rows[0].Payload)
	require.NoError(t, err)
	require.Equal(t, rows[0].EventType, env.Type)
	data, err := contract.DecodeTransferCompleted(env)
	require.NoError(t, err)
	return env.Type, data
}

func TestTransferEventCarriesKindAndReference(t *testing.T) {
	t.Parallel()
	store, b := setup(t)
	ctx := context.Background()
	fund(t, store, "alice", "USD", 1000) // from mint-USD, an allow-negative wallet
	createWallet(t, store, "bob", "USD", false)
	createWallet(t, store, "payout", "USD", true)

	for _, tc := range []struct {
		key, from, to, reference, kind string
	}{
		{"k-transfer", "alice", "bob", "rent, November ✓", contract.KindTransfer},
		{"k-withdrawal", "bob", "payout", "", contract.KindWithdrawal},
		{"k-deposit", "mint-USD", "alice", "top-up", contract.KindDeposit},
	} {
		tr, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{
			IdempotencyKey: tc.key, FromWalletID: tc.from, ToWalletID: tc.to, Amount: 10, Currency: "USD", Reference: tc.reference,
		})
		require.NoError(t, err, tc.key)
		require.Equal(t, tc.reference, tr.Reference)
		typ, data := eventOf(t, b, tr.ID.String())
		require.Equal(t, contract.TypeTransferCompletedV2, typ)
		require.Equal(t, tc.kind, data.Kind, tc.key)
		require.Equal(t, tc.reference, data.Reference)
		got, err := store.GetTransfer(ctx, tr.ID)
		require.NoError(t, err)
		require.Equal(t, tc.reference, got.Reference, "stored")
	}

	// The reference is part of the request: a replay must repeat it.
	_, replayed, err := store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "k-transfer", FromWalletID: "alice", ToWalletID: "bob", Amount: 10, Currency: "USD", Reference: "rent, November ✓",
	})
	require.NoError(t, err)
	require.True(t, replayed)
	_, _, err = store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "k-transfer", FromWalletID: "alice", ToWalletID: "bob", Amount: 10, Currency: "USD", Reference: "other",
	})
	require.ErrorIs(t, err, wallet.ErrIdempotencyKeyReused)
	_, _, err = store.CreateTransfer(ctx, wallet.TransferRequest{
		IdempotencyKey: "k-long", FromWalletID: "alice", ToWalletID: "bob", Amount: 10, Currency: "USD",
		Reference: strings.Repeat("é", contract.MaxReferenceLength+1),
	})
	require.ErrorIs(t, err, wallet.ErrInvalid)
}

func TestTransferEventVersionOneCarriesOnlyDeposits(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	store := postgres.NewStore(pool, postgres.Options{TransferEventType: contract.TypeTransferCompleted})
	runBatcher(t, store)
	b := &testBundle{pool: pool}
	fund(t, store, "alice", "USD", 100) // a deposit from mint-USD
	createWallet(t, store, "bob", "USD", false)
	createWallet(t, store, "payout", "USD", true)

	for _, tc := range []struct {
		name, key, from, to, wantType, wantKind string
	}{
		{"a deposit goes as v1, which the deposit rule posts exactly", "k-deposit", "mint-USD", "alice", contract.TypeTransferCompleted, contract.KindUnspecified},
		{"a wallet-to-wallet transfer goes as v2 with its kind", "k-transfer", "alice", "bob", contract.TypeTransferCompletedV2, contract.KindTransfer},
		{"a withdrawal goes as v2 with its kind", "k-withdrawal", "alice", "payout", contract.TypeTransferCompletedV2, contract.KindWithdrawal},
	} {
		tr, _, err := store.CreateTransfer(context.Background(), wallet.TransferRequest{
			IdempotencyKey: tc.key, FromWalletID: tc.from, ToWalletID: tc.to, Amount: 10, Currency: "USD", Reference: "kept in the wallet",
		})
		require.NoError(t, err, tc.name)
		typ, data := eventOf(t, b, tr.ID.String())
		require.Equal(t, tc.wantType, typ, tc.name)
		require.Equal(t, tc.wantKind, data.Kind, tc.name)
		if typ == contract.TypeTransferCompleted {
			require.Empty(t, data.Reference)
			rows := outboxRows(t, pool, tr.ID.String())
			require.NotContains(t, string(rows[0].Payload), `"kind"`, "an old GL reads exactly the v1 fields")
		}
	}
}
