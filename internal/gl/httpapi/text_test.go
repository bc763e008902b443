package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/envtest"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/gl/postgres"
	"walletgl/internal/metrics"
	"walletgl/internal/web/webtest"
)

// Text PostgreSQL cannot store in a path or query string is refused 400 as a problem before
// any query runs, never a 500 from the database. The server is not the document-checked one:
// these answers come from the plumbing in front of every route.
func TestTextPostgreSQLCannotStoreIsRefused400(t *testing.T) {
	t.Parallel()
	pool, _ := envtest.MigratedPool(t, "gl")
	_, guard, key := authtest.Key(t, pool, auth.GLScopes)
	srv := httptest.NewServer(httpapi.NewServer(zerolog.Nop(), httpapi.Deps{
		Ledger: postgres.NewLedger(pool), Guard: guard, Metrics: metrics.New("gl"), MetricsOnAPI: true,
	}))
	t.Cleanup(srv.Close)
	for path, slug := range map[string]string{
		"/v1/accounts/%00/balance?currency=USD":                      "invalid-request",
		"/v1/accounts/a%FFb/balance?currency=USD":                    "invalid-request",
		"/v1/accounts/%00/statement?currency=USD":                    "invalid-request",
		"/v1/accounts/wallet:alice/statement?currency=USD&after=%00": "invalid-query",
	} {
		t.Run(path, func(t *testing.T) {
			webtest.Do(t, http.MethodGet, srv.URL+path, authtest.Bearer(key), "").RequireProblem(t, http.StatusBadRequest, slug)
		})
	}
}
