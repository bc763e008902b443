package postgres_test

import (
	"context"
	"net/url"
	"os"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl/postgres"
)

// documentedGrant is a GRANT SELECT … TO gl_reconcile statement of the docs, the views it names.
var documentedGrant = regexp.MustCompile(`(?m)^GRANT SELECT ON ([a-z0-9_, ]+) TO gl_reconcile;`)

// reconcileGrants reads the views docs/database-roles.md grants the GL's reconcile role.
func reconcileGrants(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../../docs/database-roles.md")
	require.NoError(t, err)
	var views []string
	for _, m := range documentedGrant.FindAllStringSubmatch(string(doc), -1) {
		for _, v := range regexp.MustCompile(`[a-z0-9_]+`).FindAllString(m[1], -1) {
			views = append(views, v)
		}
	}
	require.NotEmpty(t, views, "docs/database-roles.md grants gl_reconcile its views")
	return views
}

// A role granted what docs/database-roles.md grants gl_reconcile, and nothing else, reads the
// newest views: each leg of a batch with its batch's entry key (reconcile_transfers_v4) and
// its balance changes keyed the same (reconcile_movements_v2), never the older views' own ids.
func TestTheDocumentedReconcileGrantsReadBatchesByTheirEntryKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	walletPool, walletURL := envtest.MigratedPool(t, "wallet")
	batch := uuid.New()
	legs := []uuid.UUID{uuid.New(), uuid.New()}
	_, err := walletPool.Exec(ctx, `
		INSERT INTO wallets (id, currency, allow_negative) VALUES ('bank', 'EUR', true), ('alice', 'EUR', false);
		UPDATE wallets SET balance = CASE id WHEN 'alice' THEN 30 ELSE -30 END;`)
	require.NoError(t, err)
	_, err = walletPool.Exec(ctx, `
		WITH b AS (INSERT INTO transfer_batches (id, idempotency_owner, idempotency_key, request_hash, legs, event_id)
		           VALUES ($1, '', 'b-1', '\x00', 2, gen_random_uuid()) RETURNING id, event_id)
		INSERT INTO transfers (id, idempotency_key, idempotency_owner, request_hash, from_wallet_id, to_wallet_id, amount, currency,
		                       event_id, batch_id, batch_leg)
		SELECT leg, 'b-1', 'batch:' || b.id || ':' || i, '\x00', 'bank', 'alice', 10 * (i + 1), 'EUR', b.event_id, b.id, i
		FROM b, unnest($2::uuid[]) WITH ORDINALITY AS l(leg, n), LATERAL (SELECT (n - 1)::int AS i) AS x`, batch, legs)
	require.NoError(t, err)

	roleURL := envtest.RoleURL(t, walletURL)
	u, err := url.Parse(roleURL)
	require.NoError(t, err)
	role := pgx.Identifier{u.User.Username()}.Sanitize()
	_, err = walletPool.Exec(ctx, "GRANT CONNECT ON DATABASE "+pgx.Identifier{walletPool.Config().ConnConfig.Database}.Sanitize()+
		" TO "+role+"; GRANT USAGE ON SCHEMA public TO "+role)
	require.NoError(t, err)
	granted := reconcileGrants(t)
	for _, v := range []string{postgres.WalletViewNameBatches, postgres.MovementsViewNameByKey, postgres.HoldsViewName, postgres.BalancesViewName} {
		require.Contains(t, granted, v, "docs/database-roles.md grants gl_reconcile %s", v)
	}
	for _, v := range granted {
		if v == "reconcile_transfers_v1" { // a GL before reversals: not a view this GL needs
			continue
		}
		_, err = walletPool.Exec(ctx, "GRANT SELECT ON "+v+" TO "+role)
		require.NoError(t, err, v)
	}

	view, err := postgres.OpenWalletView(ctx, roleURL)
	require.NoError(t, err)
	t.Cleanup(view.Close)
	transfers, err := view.Transfers(ctx)
	require.NoError(t, err)
	require.Len(t, transfers, 2)
	for _, tr := range transfers {
		require.Equal(t, batch.String(), tr.EntryKey, "leg %s is posted under its batch's key", tr.ID)
		require.Equal(t, "deposit", tr.Kind)
	}
	one, found, err := view.Transfer(ctx, legs[1].String())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, batch.String(), one.Key())
	snap, err := view.WalletSnapshot(ctx)
	require.NoError(t, err)
	require.Len(t, snap.Movements, 4, "each leg's two wallets")
	for _, m := range snap.Movements {
		require.Equal(t, batch.String(), m.ID, "a leg's balance change is keyed by its batch (reconcile_movements_v2)")
	}
	_, err = view.Holds(ctx)
	require.NoError(t, err)
	require.Empty(t, view.Denied(), "no view the GL reads is refused to the documented role")

	t.Run("a role granted only the views before batches falls back and says so", func(t *testing.T) {
		t.Parallel()
		oldURL := envtest.RoleURL(t, walletURL)
		u, err := url.Parse(oldURL)
		require.NoError(t, err)
		old := pgx.Identifier{u.User.Username()}.Sanitize()
		_, err = walletPool.Exec(ctx, "GRANT CONNECT ON DATABASE "+pgx.Identifier{walletPool.Config().ConnConfig.Database}.Sanitize()+
			" TO "+old+"; GRANT USAGE ON SCHEMA public TO "+old+
			"; GRANT SELECT ON reconcile_transfers_v2, reconcile_transfers_v3, reconcile_balances_v1, reconcile_movements_v1 TO "+old)
		require.NoError(t, err)
		oldView, err := postgres.OpenWalletView(ctx, oldURL)
		require.NoError(t, err)
		t.Cleanup(oldView.Close)
		transfers, err := oldView.Transfers(ctx)
		require.NoError(t, err)
		for _, tr := range transfers {
			require.False(t, tr.InBatch(), "v3 knows no entry keys")
		}
		_, err = oldView.WalletSnapshot(ctx)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{postgres.WalletViewNameBatches, postgres.MovementsViewNameByKey}, oldView.Denied())
	})
}
