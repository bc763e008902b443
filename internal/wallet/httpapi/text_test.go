package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/metrics"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web/webtest"
)

// Text PostgreSQL cannot store (NUL, bytes that are not UTF-8) in a path, a query string or a
// body string is refused 400 before any handler or query runs, as a problem: never a 500 from
// the database, and never in a batch of transfers. The server is not the document-checked one:
// these answers come from the plumbing in front of every route.
func TestTextPostgreSQLCannotStoreIsRefused400(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	store := postgres.NewStore(pool, postgres.Options{Log: zerolog.Nop()})
	// Transfers go through the batcher, as in the service.
	runCtx, stopBatcher := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- store.Run(runCtx) }()
	t.Cleanup(func() {
		stopBatcher()
		require.NoError(t, <-stopped)
	})
	require.Eventually(t, func() bool { return store.BatchStats().Running }, 10*time.Second, time.Millisecond)
	keys, guard, key := authtest.Key(t, pool, auth.WalletScopes)
	srv := httptest.NewServer(httpapi.NewServer(zerolog.Nop(), httpapi.Deps{
		Service: store, Admin: admin.New(pool), Guard: guard, Audit: keys, Metrics: metrics.New("wallet"), MetricsOnAPI: true,
	}))
	t.Cleanup(srv.Close)
	bearer := authtest.Bearer(key)
	do := func(method, path string, header http.Header, body string) webtest.Response {
		h := bearer.Clone()
		for k, v := range header {
			h[k] = v
		}
		if body != "" {
			h.Set("Content-Type", "application/json")
		}
		return webtest.Do(t, method, srv.URL+path, h, body)
	}
	for _, w := range []string{`{"id":"alice","currency":"USD","allow_negative":true}`, `{"id":"bob","currency":"USD"}`} {
		res := do(http.MethodPost, "/v1/wallets", nil, w)
		require.Equal(t, http.StatusCreated, res.Status, res.Body)
	}

	for _, c := range []struct {
		name, method, path, body, slug string
		header                         http.Header
	}{
		{"a NUL in a transfer's reference", http.MethodPost, "/v1/transfers",
			`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD","reference":"a\u0000b"}`,
			"invalid-request", http.Header{"Idempotency-Key": {"nul-reference"}}},
		{"a NUL in a wallet id", http.MethodPost, "/v1/wallets", `{"id":"a\u0000","currency":"USD"}`, "invalid-request", nil},
		{"a NUL in a wallet's path", http.MethodGet, "/v1/wallets/%00", "", "invalid-request", nil},
		{"bytes that are not UTF-8 in a wallet's path", http.MethodGet, "/v1/wallets/%FF", "", "invalid-request", nil},
		{"a NUL in a query string", http.MethodGet, "/v1/transfers?after=%00", "", "invalid-query", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := do(c.method, c.path, c.header, c.body)
			res.RequireProblem(t, http.StatusBadRequest, c.slug)
		})
	}
	// Nothing was written, and the wallets still serve.
	res := do(http.MethodGet, "/v1/wallets/alice", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	var transfers int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM transfers").Scan(&transfers))
	require.Zero(t, transfers)

	t.Run("a NUL among concurrent transfers never reaches their batch", func(t *testing.T) {
		var wg sync.WaitGroup
		statuses := make([]int, 8)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ref := "ok"
				if i == 0 {
					ref = `a\u0000b`
				}
				body := fmt.Sprintf(`{"from_wallet_id":"alice","to_wallet_id":"bob","amount":1,"currency":"USD","reference":"%s"}`, ref)
				statuses[i] = do(http.MethodPost, "/v1/transfers", http.Header{"Idempotency-Key": {fmt.Sprintf("batch-%d", i)}}, body).Status
			}()
		}
		wg.Wait()
		require.Equal(t, http.StatusBadRequest, statuses[0])
		for _, s := range statuses[1:] {
			require.Equal(t, http.StatusCreated, s)
		}
		require.Zero(t, store.BatchStats().Fallbacks, "no batch was rolled back and run again one by one")
	})
}
