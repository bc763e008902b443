package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/web"
)

// An address that fails to authenticate more than its allowance is answered 429 with
// Retry-After before its key is looked up in the database; another address, and valid keys from
// it before it is over, are not held back.
func TestFailedAuthenticationsPerAddressAreLimitedBeforeAnyLookup(t *testing.T) {
	t.Parallel()
	keys, _ := setup(t)
	_, secret, err := keys.Create(context.Background(), operator, "app", []auth.Scope{"wallets:read"})
	require.NoError(t, err)
	guard := auth.NewGuard(keys, authtest.Unlimited, authtest.Unavailable).LimitFailures(auth.RateLimit{PerSecond: 0.001, Burst: 3})
	h := guard.Require("wallets:read", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	call := func(addr, key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/wallets/x", nil)
		req.RemoteAddr = addr + ":40000"
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	require.Equal(t, http.StatusOK, call("192.0.2.1", secret).Code)
	for i := range 3 {
		require.Equal(t, http.StatusUnauthorized, call("192.0.2.1", fmt.Sprintf("wgl_unknown-%d", i)).Code)
	}
	before := keys.Lookups()
	rec := call("192.0.2.1", "wgl_unknown-next")
	require.Equal(t, http.StatusTooManyRequests, rec.Code, rec.Body.String())
	require.Equal(t, web.ContentTypeProblem, rec.Header().Get("Content-Type"))
	require.Contains(t, rec.Body.String(), web.TypeBase+"auth-failures-limited")
	require.NotEmpty(t, rec.Header().Get("Retry-After"))
	require.Equal(t, before, keys.Lookups(), "no lookup once the address is over its failures")
	require.Equal(t, http.StatusUnauthorized, call("198.51.100.7", "wgl_unknown-elsewhere").Code, "another address is not held back")
}

// Unknown keys are cached apart from known ones: 10,000 of them never evict a valid key.
func TestUnknownKeysNeverEvictAKnownKey(t *testing.T) {
	t.Parallel()
	keys, _ := setup(t)
	ctx := context.Background()
	_, secret, err := keys.Create(ctx, operator, "app", []auth.Scope{"wallets:read"})
	require.NoError(t, err)
	_, err = keys.Authenticate(ctx, secret)
	require.NoError(t, err)
	require.True(t, keys.Cached(secret))
	for i := range 10000 {
		_, err := keys.Authenticate(ctx, fmt.Sprintf("wgl_unknown-%d", i))
		require.ErrorIs(t, err, auth.ErrUnauthenticated)
	}
	require.True(t, keys.Cached(secret), "the valid key is still cached")
}
