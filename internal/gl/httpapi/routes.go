package httpapi

import (
	"net/http"

	"walletgl/internal/gl"
	"walletgl/internal/web"
)

// addRoutes lists every route of the API.
func addRoutes(mux *http.ServeMux, ledger gl.Reader, health []web.Check) {
	mux.Handle("GET /healthz", web.Health(health...))
	mux.Handle("GET /v1/entries", handleEntries(ledger))
	mux.Handle("GET /v1/accounts/{code}/balance", handleAccountBalance(ledger))
	mux.Handle("GET /v1/accounts/{code}/statement", handleAccountStatement(ledger))
	mux.Handle("GET /v1/trial-balance", handleTrialBalance(ledger))
}
