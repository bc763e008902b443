package postgres_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl/postgres"
)

// TestWalletViewReadsTheWalletsPublishedView reads a wallet database made by the wallet's own
// migrations (db/schema/wallet), through the view it publishes, with more transfers than one
// query reads.
func TestWalletViewReadsTheWalletsPublishedView(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	walletPool, walletURL := envtest.MigratedPool(t, "wallet")
	_, err := walletPool.Exec(ctx, `
		INSERT INTO wallets (id, currency, allow_negative) VALUES ('bank', 'EUR', true), ('alice', 'EUR', false);
		INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
		SELECT gen_random_uuid(), 'k-' || i, '\x00', 'bank', 'alice', i, 'EUR', gen_random_uuid()
		FROM generate_series(1, 2345) AS i;`)
	require.NoError(t, err)

	view, err := postgres.OpenWalletView(ctx, walletURL)
	require.NoError(t, err)
	t.Cleanup(view.Close)
	require.Equal(t, walletPool.Config().ConnConfig.Database, view.Database())

	transfers, err := view.Transfers(ctx)
	require.NoError(t, err)
	require.Len(t, transfers, 2345)
	var sum int64
	seen := map[string]bool{}
	for _, tr := range transfers {
		require.False(t, seen[tr.ID], "transfer %s read twice", tr.ID)
		seen[tr.ID] = true
		require.Equal(t, "EUR", tr.Currency)
		require.Equal(t, "deposit", tr.Kind, "from bank, an allow-negative wallet (reconcile_transfers_v3)")
		sum += tr.Amount
	}
	require.Equal(t, int64(2345*2346/2), sum)

	one, found, err := view.Transfer(ctx, transfers[17].ID)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, transfers[17], one)
	for _, id := range []string{uuid.NewString(), "tr-1"} {
		_, found, err = view.Transfer(ctx, id)
		require.NoError(t, err, id)
		require.False(t, found, id)
	}

	t.Run("a wallet without reconcile_transfers_v4 and v3 is read through v2, without kinds", func(t *testing.T) {
		t.Parallel()
		oldPool, oldURL := envtest.MigratedPool(t, "wallet")
		_, err := oldPool.Exec(ctx, `DROP VIEW reconcile_transfers_v4; DROP VIEW reconcile_transfers_v3;
			INSERT INTO wallets (id, currency, allow_negative) VALUES ('alice', 'EUR', false), ('bob', 'EUR', false);
			INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
			VALUES (gen_random_uuid(), 'k', '\x00', 'alice', 'bob', 5, 'EUR', gen_random_uuid());`)
		require.NoError(t, err)
		old, err := postgres.OpenWalletView(ctx, oldURL)
		require.NoError(t, err)
		t.Cleanup(old.Close)
		got, err := old.Transfers(ctx)
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Empty(t, got[0].Kind)
	})

	t.Run("a database without the view says so", func(t *testing.T) {
		t.Parallel()
		_, glURL := envtest.MigratedPool(t, "gl")
		other, err := postgres.OpenWalletView(ctx, glURL)
		require.NoError(t, err)
		t.Cleanup(other.Close)
		_, err = other.Transfers(ctx)
		require.ErrorContains(t, err, "the database has no view reconcile_transfers_v2")
	})
}
