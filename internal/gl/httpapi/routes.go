package httpapi

import (
	"net/http"

	"walletgl/internal/auth"
	"walletgl/internal/gl"
	"walletgl/internal/web"
)

// addRoutes lists every route of the API, each with the scope an API key needs for it;
// /healthz alone is open.
func addRoutes(mux *http.ServeMux, ledger gl.Reader, guard *auth.Guard, health []web.Check) {
	read := func(h http.Handler) http.Handler { return guard.Require(ScopeLedgerRead, h) }
	mux.Handle("GET /healthz", web.Health(health...))
	mux.Handle("GET /v1/entries", read(handleEntries(ledger)))
	mux.Handle("GET /v1/accounts/{code}/balance", read(handleAccountBalance(ledger)))
	mux.Handle("GET /v1/accounts/{code}/statement", read(handleAccountStatement(ledger)))
	mux.Handle("GET /v1/trial-balance", read(handleTrialBalance(ledger)))
}

// The GL's scopes (auth.GLScopes).
const (
	ScopeLedgerRead auth.Scope = "ledger:read"
	ScopeInboxAdmin auth.Scope = "inbox:admin"
)
