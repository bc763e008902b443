// Package httpapi is the GL's HTTP API: journal entries (by transfer, by event, by posting
// time), account balances (also as of a time) and statements, and the trial balance, plus the
// health check; and manual adjustments, the one route that writes to the ledger. Errors are
// problem+json (the plumbing is package web's). Its ledger pages of the operator console
// (console.go) read the same ledger, served under /console/.
package httpapi

import (
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/metrics"
	"walletgl/internal/tracing"
	"walletgl/internal/web"
)

// Deps is what the GL's HTTP API serves from.
type Deps struct {
	Ledger Ledger // on the primary
	// Replica, when set, is where the ledger's reads go while it is within its bound of
	// staleness; every read says where it was read (ReadSourceHeader, ReadStalenessHeader).
	Replica *Replica
	// Adjustments posts manual adjustments (POST /v1/adjustments) on the primary, each recorded
	// in the audit trail as the key that asked (postgres.Ledger.WithAudit(AuditByKey)). Nil: the
	// route answers 503.
	Adjustments gl.Adjuster
	// Inbox is the database of the GL's inbox, where an operator resolves failed events
	// (POST /v1/admin/inbox/resolve), each resolve recorded in the audit trail with it. Nil:
	// the route answers 503.
	Inbox  database.TxBeginner
	Guard  *auth.Guard // who may call which route
	Health []web.Check // what the service needs to do its work; GET /readyz runs them
	// Metrics is served at GET /metrics (with metrics:read) when MetricsOnAPI, and counts the
	// API's requests.
	Metrics      *metrics.Metrics
	MetricsOnAPI bool
	// Console, when set, serves the operator console under /console/ (package console); it
	// checks its own sessions and scopes.
	Console http.Handler
	// Tracing gives each request a server span, continuing its traceparent (nil: off).
	Tracing *tracing.Provider
}

// NewServer returns the GL's HTTP handler.
func NewServer(logger zerolog.Logger, d Deps) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, d)
	return web.Handler(logger, mux, d.Tracing, d.Metrics.ObserveHTTP)
}
