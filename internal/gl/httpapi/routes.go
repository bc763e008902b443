package httpapi

import (
	"net/http"

	"walletgl/internal/auth"
	"walletgl/internal/web"
)

// addRoutes lists every route of the API, each with the scope an API key needs for it; the
// probes (/livez, /readyz, /healthz) and the API's description (/openapi.json, which
// documents every route here) alone are open. A query parameter its operation in openapi.json
// does not list is refused (invalid-query), on every route.
func addRoutes(serveMux *http.ServeMux, d Deps) {
	mux := web.MustRoutes(serveMux, openAPI) // each route takes the query parameters openapi.json lists
	ledger := Routed(d.Ledger, d.Replica)
	read := func(h http.Handler) http.Handler { return d.Guard.Require(ScopeLedgerRead, freshness(d.Replica, h)) }
	web.Probes(mux, d.Health...)
	web.OpenAPI(mux, openAPI)
	if d.MetricsOnAPI {
		mux.Handle("GET /metrics", d.Guard.Require(auth.MetricsRead, d.Metrics.Handler()))
	}
	mux.Handle("GET /v1/entries", read(handleEntries(ledger)))
	mux.Handle("GET /v1/accounts/{code}/balance", read(handleAccountBalance(ledger)))
	mux.Handle("GET /v1/accounts/{code}/statement", read(handleAccountStatement(ledger)))
	mux.Handle("GET /v1/trial-balance", read(handleTrialBalance(ledger)))
	mux.Handle("POST /v1/adjustments", d.Guard.Require(ScopeLedgerWrite, handleCreateAdjustment(d.Adjustments)))
	mux.Handle("POST /v1/admin/inbox/resolve", d.Guard.Require(ScopeInboxAdmin, handleAdminResolveInbox(d.Inbox)))
	if d.Console != nil {
		mux.Handle("/console/", d.Console) // HTML for people, outside the OpenAPI document
	}
}

// The GL's scopes (auth.GLScopes).
const (
	ScopeLedgerRead auth.Scope = "ledger:read"
	// ScopeLedgerWrite lets a key post manual adjustments (POST /v1/adjustments).
	ScopeLedgerWrite auth.Scope = "ledger:write"
	ScopeInboxAdmin  auth.Scope = "inbox:admin"
)
