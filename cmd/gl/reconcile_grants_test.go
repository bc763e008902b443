package main

import (
	"context"
	"net/url"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/gl"
)

// A reconcile role the wallet's newest views are not granted to still reconciles through the
// older ones, and says on stderr which views it was refused and where the grants are shown;
// the role granted them says nothing.
func TestReconcileWarnsOfTheWalletsViewsItsRoleMayNotRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, glURL := envtest.MigratedPool(t, "gl")
	transfers := []gl.SourceTransfer{{ID: uuid.NewString(), Amount: 100, Currency: "USD"}}
	walletURL := walletDatabase(t, transfers)
	walletPool, err := pgx.Connect(ctx, walletURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = walletPool.Close(ctx) })
	roleWith := func(views string) string {
		roleURL := envtest.RoleURL(t, walletURL)
		u, err := url.Parse(roleURL)
		require.NoError(t, err)
		role := pgx.Identifier{u.User.Username()}.Sanitize()
		_, err = walletPool.Exec(ctx, "GRANT CONNECT ON DATABASE "+pgx.Identifier{dbName(t, walletURL)}.Sanitize()+" TO "+role+
			"; GRANT USAGE ON SCHEMA public TO "+role+"; GRANT SELECT ON "+views+" TO "+role)
		require.NoError(t, err)
		return roleURL
	}
	before := "reconcile_transfers_v2, reconcile_transfers_v3, reconcile_holds_v1, reconcile_balances_v1, reconcile_movements_v1"
	for _, tt := range []struct {
		name   string
		views  string
		warned bool
		read   string // the view of transfers the header names
	}{
		{"a role granted the views before batches is warned", before, true, "reconcile_transfers_v3"},
		{"a role granted every view is not", before + ", reconcile_transfers_v4, reconcile_movements_v2", false, "reconcile_transfers_v4"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runGL(t, map[string]string{"GL_DATABASE_URL": glURL,
				"GL_RECONCILE_WALLET_DATABASE_URL": roleWith(tt.views)}, "reconcile")
			require.ErrorContains(t, err, "differences", "the GL has no entry: the reconcile itself ran")
			require.Contains(t, stdout, "(view "+tt.read+") against GL database", "the header names the view read")
			warning := "may not read reconcile_transfers_v4, reconcile_movements_v2; read the older views instead"
			if tt.warned {
				require.Contains(t, stderr, warning)
				require.Contains(t, stderr, "docs/database-roles.md")
			} else {
				require.NotContains(t, stderr, "may not read")
			}
		})
	}
}
