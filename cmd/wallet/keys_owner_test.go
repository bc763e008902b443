package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// keys create --owner makes a key that acts for its owner; --json says whose ("owner", null
// for a key of the platform); an owner out of its alphabet is refused with a clear error.
func TestKeysCreateWithAnOwner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type created struct {
		Owner *string `json:"owner"`
		Key   string  `json:"key"`
	}
	out, _, err := b.run(t, "keys", "create", "--name", "acme-app", "--scopes", "transfers:write", "--owner", "acme.eu_1-x", "--json")
	require.NoError(t, err)
	var key created
	require.NoError(t, json.Unmarshal([]byte(out), &key), out)
	require.NotNil(t, key.Owner)
	require.Equal(t, "acme.eu_1-x", *key.Owner)

	out, _, err = b.run(t, "keys", "create", "--name", "platform-app", "--scopes", "transfers:write", "--json")
	require.NoError(t, err)
	require.Contains(t, out, `"owner": null`)

	for _, bad := range []string{"a b", "acme/1", "x123456789012345678901234567890123456789012345678901234567890123456"} {
		_, _, err = b.run(t, "keys", "create", "--name", "bad", "--scopes", "transfers:write", "--owner", bad)
		require.ErrorContains(t, err, "an owner is 1 to 64 letters, digits", bad)
	}
}
