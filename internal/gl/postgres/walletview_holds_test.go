package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres"
)

// TestWalletViewReadsHoldsUnderTheReconcileRole reads reconcile_holds_v1 as a role granted what
// docs/database-roles.md grants the GL's reconcile, and nothing else.
func TestWalletViewReadsHoldsUnderTheReconcileRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	walletPool, walletURL := envtest.MigratedPool(t, "wallet")
	pending, voided := uuid.New(), uuid.New()
	_, err := walletPool.Exec(ctx, `INSERT INTO wallets (id, currency, allow_negative) VALUES ('alice', 'EUR', true)`)
	require.NoError(t, err)
	_, err = walletPool.Exec(ctx, `
		WITH p AS (INSERT INTO holds (id, idempotency_key, request_hash, wallet_id, amount, currency, expires_at, placed_event_id)
		VALUES ($1, 'h-1', '\x00', 'alice', 150, 'EUR', now() + interval '1 hour', gen_random_uuid()))
		INSERT INTO holds (id, idempotency_key, request_hash, wallet_id, amount, currency, expires_at, placed_event_id,
		                   status, void_reason, finished_event_id, finished_at)
		VALUES ($2, 'h-2', '\x00', 'alice', 70, 'EUR', now() + interval '1 hour', gen_random_uuid(),
		        'voided', 'requested', gen_random_uuid(), now());`, pending, voided)
	require.NoError(t, err)

	grant := func(roleURL string, views ...string) {
		u, err := url.Parse(roleURL)
		require.NoError(t, err)
		role := pgx.Identifier{u.User.Username()}.Sanitize()
		db := pgx.Identifier{walletPool.Config().ConnConfig.Database}.Sanitize()
		_, err = walletPool.Exec(ctx, "GRANT CONNECT ON DATABASE "+db+" TO "+role)
		require.NoError(t, err)
		_, err = walletPool.Exec(ctx, "GRANT USAGE ON SCHEMA public TO "+role)
		require.NoError(t, err)
		for _, v := range views {
			_, err = walletPool.Exec(ctx, "GRANT SELECT ON "+v+" TO "+role)
			require.NoError(t, err)
		}
	}
	roleURL := envtest.RoleURL(t, walletURL)
	grant(roleURL, "reconcile_transfers_v2", "reconcile_transfers_v3", postgres.HoldsViewName)
	view, err := postgres.OpenWalletView(ctx, roleURL)
	require.NoError(t, err)
	t.Cleanup(view.Close)

	holds, err := view.Holds(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []gl.SourceHold{
		{ID: pending.String(), WalletID: "alice", Amount: 150, Currency: "EUR", Status: gl.HoldPending},
		{ID: voided.String(), WalletID: "alice", Amount: 70, Currency: "EUR", Status: gl.HoldVoided},
	}, holds)
	one, found, err := view.Hold(ctx, voided.String())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, gl.HoldVoided, one.Status)
	for _, id := range []string{uuid.NewString(), "h-1"} {
		_, found, err = view.Hold(ctx, id)
		require.NoError(t, err, id)
		require.False(t, found, id)
	}
	_, err = view.Transfers(ctx)
	require.NoError(t, err)

	// The role cannot read the table behind the view.
	conn, err := pgx.Connect(ctx, roleURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "SELECT 1 FROM holds")
	require.ErrorContains(t, err, "permission denied")

	t.Run("a role not granted reconcile_holds_v1 reconciles without holds", func(t *testing.T) {
		t.Parallel()
		oldURL := envtest.RoleURL(t, walletURL)
		grant(oldURL, "reconcile_transfers_v2", "reconcile_transfers_v3")
		old, err := postgres.OpenWalletView(ctx, oldURL)
		require.NoError(t, err)
		t.Cleanup(old.Close)
		_, err = old.Holds(ctx)
		require.True(t, errors.Is(err, gl.ErrNoHolds), "%v", err)
	})
}
