// Package httpapi is the GL's read-only HTTP API: journal entries (by transfer, by event, by
// posting time), account balances (also as of a time) and statements, and the trial balance,
// plus the health check. Errors are problem+json (the plumbing is package web's).
package httpapi

import (
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/gl"
	"walletgl/internal/web"
)

// NewServer returns the GL's HTTP handler. guard decides who may call which route; health
// names what the service needs to do its work, and GET /healthz runs it (none: always healthy).
func NewServer(logger zerolog.Logger, ledger gl.Reader, guard *auth.Guard, health []web.Check) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, ledger, guard, health)
	return web.Handler(logger, mux)
}
