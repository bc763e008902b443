package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/metrics"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/httpapi"
	"walletgl/internal/web"
	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// The document is served without a key, and each of its operations is a route of the service
// (the other way round, a route missing from the document, fails the test that calls it).
func TestTheOpenAPIDocumentIsServedAndEveryOperationIsARoute(t *testing.T) {
	t.Parallel()
	// No request here reaches the database: the guard refuses them all for want of a key.
	guard := auth.NewGuard(auth.NewKeys(nil, auth.WalletScopes), authtest.Unlimited, wallet.ErrUnavailable)
	srv := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{Guard: guard, MetricsOnAPI: true, Metrics: metrics.New("wallet")}))

	res := webtest.Do(t, http.MethodGet, srv.URL+"/openapi.json", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Equal(t, "application/json", res.ContentType())
	require.Equal(t, string(httpapi.OpenAPI()), res.Body)

	doc, err := document()
	require.NoError(t, err)
	doc.RequireEveryOperationIsARoute(t, srv.URL, 24)
}

// The check is not vacuous: an answer or a request that strays from the document fails it,
// with the validator's message. A stand-in for the service answers here, as a handler that
// drifted from the document would.
func TestTheOpenAPICheckCatchesDrift(t *testing.T) {
	t.Parallel()
	doc, err := document()
	require.NoError(t, err)
	const (
		alice    = `{"id":"alice","currency":"USD","minor_units":2,"balance":1000,"held":0,"available":1000,"allow_negative":false,"min_balance":0,"max_balance":null,"below_minimum":0,"owner":null,"metadata":{}}`
		notFound = `{"type":"https://walletgl.dev/problems/wallet-not-found","title":"Not Found","status":404,"detail":"no alice","instance":"/v1/wallets/alice"}`
		transfer = `{"id":"0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70","idempotency_key":"k","from_wallet_id":"a","to_wallet_id":"b","amount":1,"currency":"USD","metadata":{},"status":"completed","created_at":"2026-01-02T15:04:05Z","outbox_status":"pending"}`
	)
	key := authtest.Bearer("wgl_whatever")
	tests := []struct {
		name         string
		method, path string
		header       http.Header
		status       int
		contentType  string
		body         string
		want         []string // in the failures, in order; none: the exchange conforms
	}{
		{"a wallet as documented conforms", "GET", "/v1/wallets/alice", key, 200, "application/json", alice, nil},
		{"a renamed field", "GET", "/v1/wallets/alice", key, 200, "application/json",
			`{"id":"alice","currency":"USD","balanse":1000,"allow_negative":false}`, []string{"answer does not conform", "balanse"}},
		{"a balance in a string", "GET", "/v1/wallets/alice", key, 200, "application/json",
			`{"id":"alice","currency":"USD","minor_units":2,"balance":"1000","held":0,"available":1000,"allow_negative":false}`, []string{"answer does not conform", "balance"}},
		{"a list without its next_cursor", "GET", "/v1/transfers", key, 200, "application/json",
			`{"transfers":[` + transfer + `]}`, []string{"answer does not conform", "next_cursor"}},
		{"a list as documented conforms", "GET", "/v1/transfers", key, 200, "application/json",
			`{"transfers":[` + transfer + `],"next_cursor":null}`, nil},
		{"a problem as documented conforms", "GET", "/v1/wallets/alice", key, 404, web.ContentTypeProblem, notFound, nil},
		{"a problem type the route does not document", "GET", "/v1/wallets/alice", key, 404, web.ContentTypeProblem,
			`{"type":"https://walletgl.dev/problems/transfer-not-found","title":"Not Found","status":404,"detail":"no","instance":"/v1/wallets/alice"}`,
			[]string{"answer does not conform", "type"}},
		{"a problem without its detail", "GET", "/v1/wallets/alice", key, 404, web.ContentTypeProblem,
			`{"type":"https://walletgl.dev/problems/wallet-not-found","title":"Not Found","status":404,"instance":"/v1/wallets/alice"}`,
			[]string{"answer does not conform", "detail"}},
		{"a problem sent as application/json", "GET", "/v1/wallets/alice", key, 404, "application/json", notFound,
			[]string{"answer does not conform", "application/json"}},
		{"a status the route does not document", "GET", "/v1/wallets/alice", key, http.StatusTeapot, web.ContentTypeProblem, notFound,
			[]string{"answer does not conform", "418"}},
		{"an undocumented route", "GET", "/v1/wallets/alice/history", key, 200, "application/json", `[]`,
			[]string{"request does not conform", "not found", "answer does not conform", "NotFound"}},
		{"an undocumented method", "PUT", "/v1/wallets/alice", key, 200, "application/json", alice,
			[]string{"request does not conform", "answer does not conform", "MethodNotAllowed"}},
		{"an undocumented route's not-found, sent on purpose", "GET", "/v1/nothing", openapitest.Invalid(key, "no such route"), 404, web.ContentTypeProblem,
			`{"type":"https://walletgl.dev/problems/not-found","title":"Not Found","status":404,"detail":"nothing","instance":"/v1/nothing"}`, nil},
		{"a request against the document, not marked", "GET", "/v1/transfers?limit=0", key, 400, web.ContentTypeProblem,
			`{"type":"https://walletgl.dev/problems/invalid-limit","title":"Bad Request","status":400,"detail":"no","instance":"/v1/transfers"}`,
			[]string{"request does not conform", "limit"}},
		{"a valid request marked invalid", "GET", "/v1/wallets/alice", openapitest.Invalid(key, "it is not"), 200, "application/json", alice,
			[]string{"marked invalid (it is not), but the document accepts it"}},
		{"a request without a key", "GET", "/v1/wallets/alice", nil, 200, "application/json", alice,
			[]string{"request does not conform", "Authorization"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var failures openapitest.Failures
			stand := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "r-1")
				w.Header().Set("Allow", "GET, HEAD")
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			})
			srv := httptest.NewServer(doc.Handler(&failures, stand))
			t.Cleanup(srv.Close)
			res := webtest.Do(t, tt.method, srv.URL+tt.path, tt.header, "")
			require.Equal(t, tt.status, res.Status, "the answer passes unchanged")
			require.Equal(t, tt.body, res.Body)
			got := failures.Take()
			if tt.want == nil {
				require.Empty(t, got)
				return
			}
			requireInOrder(t, got, tt.want...)
		})
	}

	t.Run("an answer without its X-Request-Id", func(t *testing.T) {
		t.Parallel()
		var failures openapitest.Failures
		srv := httptest.NewServer(doc.Handler(&failures, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			web.Encode(w, r, http.StatusOK, map[string]any{"id": "alice", "currency": "USD", "balance": 1, "held": 0, "available": 1, "allow_negative": false})
		})))
		t.Cleanup(srv.Close)
		webtest.Do(t, http.MethodGet, srv.URL+"/v1/wallets/alice", key, "")
		requireInOrder(t, failures.Take(), "answer does not conform", "X-Request-Id")
	})
}

// requireInOrder checks that the failures, joined, hold each of want, in that order.
func requireInOrder(t *testing.T, failures []string, want ...string) {
	t.Helper()
	require.NotEmpty(t, failures, "the check must fail")
	var all string
	for _, f := range failures {
		all += f + "\n"
	}
	pattern := ""
	for _, w := range want {
		pattern += "(?s).*" + regexp.QuoteMeta(w)
	}
	require.Regexp(t, pattern, all)
}

// Every route refuses a query parameter its operation does not list, the probes, metrics and
// the document included; each parameter it lists passes.
func TestEveryRouteRefusesAnUnknownQueryParameter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := document()
	require.NoError(t, err)
	doc.RequireStrictQueryStrings(t, b.url, authtest.Bearer(b.key), 24)
}
