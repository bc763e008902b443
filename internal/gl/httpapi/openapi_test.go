package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/auth"
	"walletgl/internal/auth/authtest"
	"walletgl/internal/gl"
	"walletgl/internal/gl/httpapi"
	"walletgl/internal/metrics"
	"walletgl/internal/web"
	"walletgl/internal/web/openapitest"
	"walletgl/internal/web/webtest"
)

// The document is served without a key, and each of its operations is a route of the service
// (the other way round, a route missing from the document, fails the test that calls it).
func TestTheOpenAPIDocumentIsServedAndEveryOperationIsARoute(t *testing.T) {
	t.Parallel()
	// No request here reaches the database: the guard refuses them all for want of a key.
	guard := auth.NewGuard(auth.NewKeys(nil, auth.GLScopes), authtest.Unlimited, gl.ErrUnavailable)
	server := serve(t, httpapi.NewServer(zerolog.Nop(), httpapi.Deps{Guard: guard, MetricsOnAPI: true, Metrics: metrics.New("gl")}))

	res := webtest.Do(t, http.MethodGet, server.URL+"/openapi.json", nil, "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Equal(t, "application/json", res.ContentType())
	require.Equal(t, string(httpapi.OpenAPI()), res.Body)

	doc, err := document()
	require.NoError(t, err)
	doc.RequireEveryOperationIsARoute(t, server.URL, 11)
}

func TestMetricsOnTheAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var body map[string]any
	b.get(t, "/v1/trial-balance", &body)
	res := webtest.Do(t, http.MethodGet, b.server.URL+"/metrics", authtest.Bearer(b.key), "")
	require.Equal(t, http.StatusOK, res.Status, res.Body)
	require.Contains(t, res.Body, `walletgl_http_requests_total{code="2xx",method="GET",route="GET /v1/trial-balance",service="gl"} 1`)
}

// The check is not vacuous: an answer that strays from the document fails it, with the
// validator's message. A stand-in for the service answers here, as a handler that drifted
// from the document would.
func TestTheOpenAPICheckCatchesDrift(t *testing.T) {
	t.Parallel()
	doc, err := document()
	require.NoError(t, err)
	line := `{"line_id":2,"entry_id":"0190b3c2-7a4e-7c5e-9d1a-2b3c4d5e6f70","event_id":"e","transfer_id":"t","direction":"credit","amount":10,"posted_at":"2026-01-02T15:04:05.123456Z","running_balance":RB}`
	statement := func(runningBalance, nextCursor string) string {
		return `{"account_code":"2010","currency":"USD","minor_units":2,"normal_balance":"credit","lines":[` +
			strings.Replace(line, "RB", runningBalance, 1) + `],"next_cursor":` + nextCursor + `}`
	}
	const path = "/v1/accounts/2010/statement?currency=USD"
	tests := []struct {
		name      string
		status    int
		body      string
		want      []string // in the failures, in order; none: the answer conforms
		staleness string   // X-Read-Staleness ("": 0.250; "-": neither freshness header)
	}{
		{"a statement as documented conforms", 200, statement("10", `"2"`), nil, ""},
		{"a running balance beyond 64 bits conforms", 200, statement("92233720368547758170", "null"), nil, ""},
		{"a running balance in a string", 200, statement(`"10"`, "null"), []string{"answer does not conform", "running_balance"}, ""},
		{"a fractional running balance", 200, statement("10.5", "null"), []string{"answer does not conform", "running_balance"}, ""},
		{"a statement without its next_cursor", 200, strings.Replace(statement("10", "null"), `,"next_cursor":null`, "", 1),
			[]string{"answer does not conform", "next_cursor"}, ""},
		{"a renamed field", 200, strings.Replace(statement("10", "null"), `"running_balance"`, `"balance"`, 1),
			[]string{"answer does not conform", "balance"}, ""},
		{"a problem type the route does not document", 400,
			`{"type":"https://walletgl.dev/problems/invalid-transfer-id","title":"Bad Request","status":400,"detail":"no","instance":"/v1/accounts/2010/statement"}`,
			[]string{"answer does not conform", "type"}, ""},
		{"a read that does not say where it was read", 200, statement("10", "null"),
			[]string{"answer does not conform", "X-Read-Source", "X-Read-Staleness"}, "-"},
		{"a staleness with a unit", 200, statement("10", "null"), []string{"answer does not conform", "x-read-staleness", "does not match pattern"}, "0.25s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var failures openapitest.Failures
			server := httptest.NewServer(doc.Handler(&failures, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "r-1")
				switch tt.staleness {
				case "-":
				case "":
					w.Header().Set(httpapi.ReadSourceHeader, "replica")
					w.Header().Set(httpapi.ReadStalenessHeader, "0.250")
				default:
					w.Header().Set(httpapi.ReadSourceHeader, "replica")
					w.Header().Set(httpapi.ReadStalenessHeader, tt.staleness)
				}
				contentType := "application/json"
				if tt.status >= 400 {
					contentType = web.ContentTypeProblem
				}
				w.Header().Set("Content-Type", contentType)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			})))
			t.Cleanup(server.Close)
			res := webtest.Do(t, http.MethodGet, server.URL+path, authtest.Bearer("wgl_whatever"), "")
			require.Equal(t, tt.body, res.Body, "the answer passes unchanged")
			got := strings.Join(failures.Take(), "\n")
			if tt.want == nil {
				require.Empty(t, got)
				return
			}
			pattern := ""
			for _, w := range tt.want {
				pattern += "(?s).*" + regexp.QuoteMeta(w)
			}
			require.Regexp(t, pattern, got)
		})
	}
}

// Every route refuses a query parameter its operation does not list, the probes, metrics and
// the document included; each parameter it lists passes.
func TestEveryRouteRefusesAnUnknownQueryParameter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doc, err := document()
	require.NoError(t, err)
	doc.RequireStrictQueryStrings(t, b.server.URL, authtest.Bearer(b.key), 11)
}
