package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
)

// The wallet calls the GL with a key that only reads what its console and wallet outbox
// reconcile read (GET /v1/entries, GET /metrics), never the admin key printed for people.
func TestTheWalletsGLKeyOnlyReads(t *testing.T) {
	t.Parallel()
	keys := localKeys()
	spec := keys[walletGLKey]
	require.Equal(t, "gl", spec.service)
	require.ElementsMatch(t, []auth.Scope{"ledger:read", "metrics:read"}, spec.scopes)
	parsed, err := auth.ParseScopes(joinScopes(spec.scopes), auth.GLScopes)
	require.NoError(t, err, "scopes the GL knows")
	require.NotContains(t, parsed, auth.Admin)

	for _, entry := range []string{walletAdminKey, glAdminKey} {
		require.Equal(t, []auth.Scope{auth.Admin}, keys[entry].scopes, "the try-it session's %s key", entry)
	}
}
