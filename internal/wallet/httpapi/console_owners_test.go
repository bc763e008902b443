package httpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/console"
	"walletgl/internal/envtest"
	"walletgl/internal/events/admin"
	"walletgl/internal/metadata"
	"walletgl/internal/metrics"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/glapi"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/wallet/postgres"
	"walletgl/internal/web"
)

// The console shows a key with an owner its owner's transfers only, and refuses it the pages
// that show every owner's data (the outbox).
func TestTheConsoleShowsAKeyWithAnOwnerItsOwnersDataOnly(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "wallet")
	store := postgres.NewStore(pool, postgres.Options{})
	keys, guard, _ := authtest.Key(t, pool, auth.WalletScopes)
	ctx := context.Background()
	acme := wallet.WithActor(ctx, wallet.Actor{Owner: "acme"})
	for _, w := range []struct {
		ctx context.Context
		w   wallet.Wallet
	}{
		{ctx, wallet.Wallet{ID: "mint", Currency: "USD", AllowNegative: true}},
		{ctx, wallet.Wallet{ID: "alice", Currency: "USD"}},
		{acme, wallet.Wallet{ID: "acme-1", Currency: "USD"}},
	} {
		_, err := store.CreateWallet(w.ctx, w.w)
		require.NoError(t, err)
	}
	theirs, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{IdempotencyKey: "platform-1", FromWalletID: "mint", ToWalletID: "alice", Amount: 5, Currency: "USD"})
	require.NoError(t, err)
	ours, _, err := store.CreateTransfer(ctx, wallet.TransferRequest{IdempotencyKey: "fund-acme", FromWalletID: "mint", ToWalletID: "acme-1", Amount: 7, Currency: "USD",
		Metadata: metadata.Metadata{"order_id": "o-<7>"}})
	require.NoError(t, err)

	glDown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(glDown.Close)
	trace := httpapi.Trace{Transfers: store, Admin: admin.New(pool), GL: glapi.New(glDown.URL, "gl-key"), Stream: "WALLET_EVENTS", Scope: httpapi.ScopeTransfersRead}
	events := console.Events{Admin: admin.New(pool), Audit: keys, View: "outbox:admin", Requeue: "outbox:admin", RetryScope: "inbox:admin"}
	c, err := console.New(console.Config{Service: "wallet", Guard: guard, Metrics: metrics.New("wallet"), Pages: append(events.Pages(), trace.Pages()...)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/console/", c)
	srv := httptest.NewServer(web.Handler(zerolog.Nop(), mux, nil))
	t.Cleanup(srv.Close)

	_, secret, err := keys.CreateOwned(ctx, auth.Actor{Name: "test"}, "acme", "acme", []auth.Scope{"transfers:read", "outbox:admin"})
	require.NoError(t, err)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (int, string) {
		res, err := browser.Get(srv.URL + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	res, err := browser.PostForm(srv.URL+"/console/login", url.Values{"key": {secret}})
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)

	status, body := get("/console/transfers")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, ours.ID.String())
	require.NotContains(t, body, theirs.ID.String())
	status, body = get("/console/transfers/" + ours.ID.String())
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<td><code>order_id</code></td><td>o-&lt;7&gt;</td>", "the trace lists the transfer's metadata, escaped")
	status, _ = get("/console/transfers/" + theirs.ID.String())
	require.Equal(t, http.StatusNotFound, status)
	status, _ = get("/console/transfers?q=platform-1")
	require.Equal(t, http.StatusNotFound, status, "another owner's Idempotency-Key names nothing")
	status, body = get("/console/outbox?status=pending")
	require.Equal(t, http.StatusForbidden, status)
	require.True(t, strings.Contains(body, "acme"), body)
}
