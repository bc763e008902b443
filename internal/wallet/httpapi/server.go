// Package httpapi is the wallet service's HTTP interface: JSON in, JSON out, and every error as
// application/problem+json with a stable type. It knows the domain (package wallet), never
// the storage behind it.
package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/events"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
)

// NewServer returns the wallet service's HTTP handler. admin serves the operator endpoints
// (/v1/admin/...). health reports whether the service can do its work (nil: yes); it answers
// GET /healthz.
func NewServer(logger zerolog.Logger, service wallet.Service, admin *events.Admin, health func(ctx context.Context) error) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, service, admin, health)
	var handler http.Handler = problemsForUnrouted(mux)
	handler = logRequests(logger, handler)
	return handler
}

// writeError answers with the problem for err. The database's own error behind
// wallet.ErrUnavailable never reaches the client, so it is logged here.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, wallet.ErrUnavailable) {
		zerolog.Ctx(r.Context()).Warn().Err(err).Msg("database unavailable")
	}
	problem.Write(w, r, err)
}
