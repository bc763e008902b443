package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
)

// The GL's ledger has no owners: a GL key with one would read all of it, so none is made.
func TestGLKeysHaveNoOwner(t *testing.T) {
	t.Parallel()
	_, dbURL := envtest.MigratedPool(t, "gl")
	_, _, err := runGL(t, glEnv(dbURL), "keys", "create", "--name", "acme", "--scopes", "ledger:read", "--owner", "acme")
	require.ErrorContains(t, err, "--owner is for the wallet's keys")
}
