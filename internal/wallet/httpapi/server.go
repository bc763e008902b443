// Package httpapi is the wallet service's HTTP interface: JSON in, JSON out, and every error as
// application/problem+json with a stable type (the plumbing is package web's). It knows the
// domain (package wallet), never the storage behind it.
package httpapi

import (
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/events"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

// NewServer returns the wallet service's HTTP handler. admin serves the operator endpoints
// (/v1/admin/...). health names what the service needs to do its work; GET /healthz runs it
// (none: always healthy).
func NewServer(logger zerolog.Logger, service wallet.Service, admin *events.Admin, health []web.Check) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, service, admin, health)
	return web.Handler(logger, mux)
}
