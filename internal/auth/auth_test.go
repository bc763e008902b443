package auth_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/envtest"
	"walletgl/internal/problem"
	"walletgl/internal/web"
	"walletgl/internal/web/webtest"
)

var operator = auth.Actor{Name: "cli:test"}

func setup(t *testing.T) (*auth.Keys, *pgxpool.Pool) {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "wallet")
	return auth.NewKeys(pool, auth.WalletScopes), pool
}

func TestAKeyIsShownOnceStoredAsAHashAndRevoked(t *testing.T) {
	t.Parallel()
	keys, pool := setup(t)
	ctx := context.Background()
	key, secret, err := keys.Create(ctx, operator, "payments-app", []auth.Scope{"transfers:write", "transfers:read"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, "wgl_"))
	require.GreaterOrEqual(t, len(secret), 40, "a high-entropy secret")

	var stored string
	require.NoError(t, pool.QueryRow(ctx, "SELECT row_to_json(k)::text FROM api_keys k").Scan(&stored))
	require.NotContains(t, stored, strings.TrimPrefix(secret, "wgl_"), "the secret is never stored")

	p, err := keys.Authenticate(ctx, secret)
	require.NoError(t, err)
	require.Equal(t, key.ID, p.KeyID)
	require.True(t, p.Has("transfers:write"))
	require.False(t, p.Has("outbox:admin"))
	_, err = keys.Authenticate(ctx, secret+"x")
	require.ErrorIs(t, err, auth.ErrUnauthenticated)

	_, err = keys.Revoke(ctx, operator, key.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := keys.Authenticate(ctx, secret)
		return err != nil
	}, 10*time.Second, 100*time.Millisecond, "a revoked key is refused once the cache has expired")
	_, err = keys.Revoke(ctx, operator, uuid.New())
	require.ErrorIs(t, err, auth.ErrKeyNotFound)

	list, err := keys.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotNil(t, list[0].RevokedAt)

	entries, err := keys.AuditLog(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	require.Equal(t, "key.create", entries[0].Action)
	require.Equal(t, "key.revoke", entries[1].Action)
	require.Equal(t, key.ID.String(), entries[1].Target)
	require.Equal(t, "cli:test", entries[1].Actor)
}

func TestTheAuditTrailIsAppendOnly(t *testing.T) {
	t.Parallel()
	keys, pool := setup(t)
	ctx := context.Background()
	_, _, err := keys.Create(ctx, operator, "k", []auth.Scope{auth.Admin})
	require.NoError(t, err)
	for _, stmt := range []string{"UPDATE audit_log SET action = 'nothing'", "DELETE FROM audit_log", "TRUNCATE audit_log"} {
		_, err := pool.Exec(ctx, stmt)
		require.ErrorContains(t, err, "append-only", stmt)
	}
}

func TestKeysRecordTheirLastUse(t *testing.T) {
	t.Parallel()
	keys, _ := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	key, secret, err := keys.Create(ctx, operator, "k", []auth.Scope{auth.Admin})
	require.NoError(t, err)
	require.Nil(t, key.LastUsedAt)
	_, err = keys.Authenticate(ctx, secret)
	require.NoError(t, err)
	done := make(chan error)
	go func() { done <- keys.Run(ctx) }()
	cancel() // the last flush runs as Run stops
	require.NoError(t, <-done)
	list, err := keys.List(context.Background())
	require.NoError(t, err)
	require.NotNil(t, list[0].LastUsedAt)
}

func TestTheGuardRefusesWhatTheKeyDoesNotAllow(t *testing.T) {
	t.Parallel()
	keys, _ := setup(t)
	ctx := context.Background()
	_, reader, err := keys.Create(ctx, operator, "reader", []auth.Scope{"transfers:read"})
	require.NoError(t, err)
	_, admin, err := keys.Create(ctx, operator, "admin", []auth.Scope{auth.Admin})
	require.NoError(t, err)
	revoked, revokedSecret, err := keys.Create(ctx, operator, "gone", []auth.Scope{auth.Admin})
	require.NoError(t, err)
	_, err = keys.Revoke(ctx, operator, revoked.ID)
	require.NoError(t, err)

	guard := auth.NewGuard(keys, auth.RateLimit{PerSecond: 1, Burst: 2}, problem.New(problem.Unavailable, "unavailable", "retry later"))
	mux := http.NewServeMux()
	mux.Handle("POST /v1/transfers", guard.Require("transfers:write", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		require.True(t, ok)
		web.Encode(w, r, http.StatusCreated, map[string]string{"key": p.Name})
	})))
	var logs bytes.Buffer
	srv := httptest.NewServer(web.Handler(zerolog.New(&logs).Level(zerolog.DebugLevel), mux, nil))
	t.Cleanup(srv.Close)
	post := func(authorization string) webtest.Response {
		h := http.Header{}
		if authorization != "" {
			h.Set("Authorization", authorization)
		}
		return webtest.Do(t, http.MethodPost, srv.URL+"/v1/transfers", h, `{}`)
	}

	for name, header := range map[string]string{
		"no key": "", "another scheme": "Basic " + admin, "an unknown key": "Bearer wgl_nothing", "a revoked key": "Bearer " + revokedSecret,
	} {
		t.Run(name+" is 401", func(t *testing.T) {
			res := post(header)
			res.RequireProblem(t, http.StatusUnauthorized, "unauthenticated")
			require.Contains(t, res.Header.Get("WWW-Authenticate"), "Bearer")
		})
	}
	post("Bearer "+reader).RequireProblem(t, http.StatusForbidden, "forbidden")

	// admin implies the scope; its burst of 2 passes, the third is over the rate.
	for range 2 {
		require.Equal(t, http.StatusCreated, post("Bearer "+admin).Status)
	}
	res := post("Bearer " + admin)
	res.RequireProblem(t, http.StatusTooManyRequests, "rate-limited")
	require.NotEmpty(t, res.Header.Get("Retry-After"))

	require.Contains(t, logs.String(), `"key_name":"admin"`, "the key's name is logged")
	for _, secret := range []string{admin, reader, revokedSecret} {
		require.NotContains(t, logs.String(), strings.TrimPrefix(secret, "wgl_"), "a key's secret never reaches the log")
	}
}

func TestParseScopesAndRateLimit(t *testing.T) {
	t.Parallel()
	scopes, err := auth.ParseScopes("transfers:read, transfers:write,transfers:read", auth.WalletScopes)
	require.NoError(t, err)
	require.Equal(t, []auth.Scope{"transfers:read", "transfers:write"}, scopes)
	_, err = auth.ParseScopes("ledger:read", auth.WalletScopes)
	require.ErrorContains(t, err, "not one of")
	_, err = auth.ParseScopes(" , ", auth.WalletScopes)
	require.Error(t, err)

	limit, err := auth.ParseRateLimit("50")
	require.NoError(t, err)
	require.Equal(t, auth.RateLimit{PerSecond: 50, Burst: 100}, limit)
	limit, err = auth.ParseRateLimit("50:7")
	require.NoError(t, err)
	require.Equal(t, auth.RateLimit{PerSecond: 50, Burst: 7}, limit)
	for _, bad := range []string{"", "x", "0", "-1", "5:0", "5:x"} {
		_, err := auth.ParseRateLimit(bad)
		require.Error(t, err, bad)
	}
}
