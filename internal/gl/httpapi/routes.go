package httpapi

import (
	"context"
	"net/http"

	"walletgl/internal/gl"
)

// addRoutes lists every route of the API.
func addRoutes(mux *http.ServeMux, ledger gl.Reader, health func(ctx context.Context) error) {
	mux.Handle("GET /healthz", handleHealthz(health))
	mux.Handle("GET /v1/entries", handleEntries(ledger))
	mux.Handle("GET /v1/accounts/{code}/balance", handleAccountBalance(ledger))
	mux.Handle("GET /v1/accounts/{code}/statement", handleAccountStatement(ledger))
	mux.Handle("GET /v1/trial-balance", handleTrialBalance(ledger))
	mux.Handle("GET /", handleNotFound())
}
