package postgres_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl/postgres"
)

// contractViews creates reconcile_transfers_v4 and reconcile_movements_v2 as the batch
// contract defines them for transfers outside a batch (entry key = the transfer's id) where the
// wallet's migrations have not (db/contract/wallet_reconcile_batches.sql); where they have, the
// wallet's own views are read.
const contractViews = `DO $$ BEGIN
	IF to_regclass('reconcile_transfers_v4') IS NULL THEN
		CREATE VIEW reconcile_transfers_v4 AS
		SELECT v.id, v.amount, v.currency, v.created_at, v.reverses_transfer_id, v.kind, v.id::text AS entry_key
		FROM reconcile_transfers_v3 v;
	END IF;
	IF to_regclass('reconcile_movements_v2') IS NULL THEN
		CREATE VIEW reconcile_movements_v2 AS SELECT * FROM reconcile_movements_v1;
	END IF;
END $$`

// TestWalletViewReadsEntryKeysFromV4ElseV3 reads each transfer's entry key from
// reconcile_transfers_v4 and the movements from reconcile_movements_v2, and falls back to v3 and
// v1 in a wallet database without them.
func TestWalletViewReadsEntryKeysFromV4ElseV3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, withV4 := range []bool{true, false} {
		walletPool, walletURL := envtest.MigratedPool(t, "wallet")
		setup := contractViews
		if !withV4 {
			setup = `DROP VIEW IF EXISTS reconcile_transfers_v4; DROP VIEW IF EXISTS reconcile_movements_v2`
		}
		_, err := walletPool.Exec(ctx, setup)
		require.NoError(t, err)
		_, err = walletPool.Exec(ctx, `
			INSERT INTO wallets (id, currency, allow_negative) VALUES ('bank', 'EUR', true), ('alice', 'EUR', false);
			UPDATE wallets SET balance = CASE id WHEN 'alice' THEN 6 ELSE -6 END;
			INSERT INTO transfers (id, idempotency_key, request_hash, from_wallet_id, to_wallet_id, amount, currency, event_id)
			SELECT gen_random_uuid(), 'k-' || i, '\x00', 'bank', 'alice', i, 'EUR', gen_random_uuid()
			FROM generate_series(1, 3) AS i;`)
		require.NoError(t, err)
		view, err := postgres.OpenWalletView(ctx, walletURL)
		require.NoError(t, err)
		t.Cleanup(view.Close)

		transfers, err := view.Transfers(ctx)
		require.NoError(t, err)
		require.Len(t, transfers, 3)
		for _, tr := range transfers {
			require.Equal(t, "deposit", tr.Kind)
			if withV4 {
				require.Equal(t, tr.ID, tr.EntryKey, "a transfer outside a batch is posted under its own id")
			} else {
				require.Empty(t, tr.EntryKey, "v3 knows no entry keys")
			}
			require.Equal(t, tr.ID, tr.Key())
			one, found, err := view.Transfer(ctx, tr.ID)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, tr, one)
		}
		snap, err := view.WalletSnapshot(ctx)
		require.NoError(t, err, "v4 %v", withV4)
		require.Len(t, snap.Wallets, 2)
		require.Len(t, snap.Movements, 6, "each transfer's two wallets")
	}
}
