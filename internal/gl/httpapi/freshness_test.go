package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth/authtest"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// Without a replica, every ledger read says it was read on the primary, and nothing else does.
func TestReadsWithoutReplicaSayPrimary(t *testing.T) {
	t.Parallel()
	transfer := uuid.Must(uuid.NewV7()).String()
	b := setup(t, entry(transfer, "USD", 500))
	for _, path := range []string{
		"/v1/entries?transfer_id=" + transfer,
		"/v1/entries",
		"/v1/accounts/1010/balance?currency=USD",
		"/v1/accounts/1010/balance?currency=USD&wallet_id=w-from",
		"/v1/accounts/1010/statement?currency=USD",
		"/v1/trial-balance",
	} {
		res := webtest.Do(t, http.MethodGet, b.server.URL+path, authtest.Bearer(b.key), "")
		require.Equal(t, http.StatusOK, res.Status, path)
		require.Equal(t, "primary", res.Header.Get(httpapi.ReadSourceHeader), path)
		require.Equal(t, "0", res.Header.Get(httpapi.ReadStalenessHeader), path)
	}
	res := webtest.Do(t, http.MethodGet, b.server.URL+"/healthz", nil, "")
	require.Empty(t, res.Header.Get(httpapi.ReadSourceHeader), "a probe reads no ledger")
	res = webtest.Do(t, http.MethodGet, b.server.URL+"/v1/trial-balance", openapitest.Invalid(nil, "no API key"), "")
	require.Equal(t, http.StatusUnauthorized, res.Status)
	require.Empty(t, res.Header.Get(httpapi.ReadSourceHeader), "nothing was read for a request refused its key")
}
