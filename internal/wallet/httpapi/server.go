// Package httpapi is the wallet service's HTTP interface: JSON in, JSON out, and every error as
// application/problem+json with a stable type (the plumbing is package web's). It knows the
// domain (package wallet), never the storage behind it. It also holds the wallet's own pages of
// the operator console (console.go: the transfers and their trace), served under /console/.
package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/events/admin"
	"walletgl/internal/metadata"
	"walletgl/internal/metrics"
	"walletgl/internal/tracing"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

// Deps is what the wallet's HTTP API serves from.
type Deps struct {
	Service wallet.Service
	Admin   *admin.Admin // the operator endpoints (/v1/admin/...)
	Guard   *auth.Guard  // who may call which route
	Audit   Auditor      // where administrative actions are recorded
	Health  []web.Check  // what the service needs to do its work; GET /readyz runs them
	// Metrics is served at GET /metrics (with metrics:read) when MetricsOnAPI, and counts the
	// API's requests and transfers.
	Metrics      *metrics.Metrics
	MetricsOnAPI bool
	// Console, when set, serves the operator console under /console/ (package console); it
	// checks its own sessions and scopes.
	Console http.Handler
	// Tracing gives each request a server span, continuing its traceparent (nil: off).
	Tracing *tracing.Provider
}

// Auditor records an administrative action (auth.Keys does, in the audit trail).
type Auditor interface {
	Record(ctx context.Context, actor auth.Actor, action, target string, detail any) error
}

// NewServer returns the wallet service's HTTP handler.
func NewServer(logger zerolog.Logger, d Deps) http.Handler {
	mux := http.NewServeMux()
	addRoutes(mux, d)
	return web.Handler(logger, mux, d.Tracing, d.Metrics.ObserveHTTP)
}

// decodeWithMetadata reads a request body of type T strictly and its metadata member (metaOf
// picks it) through metadata.FromJSON, which names what is wrong with it. It answers the
// problem itself when either is malformed; ok is false then.
func decodeWithMetadata[T any](w http.ResponseWriter, r *http.Request, metaOf func(T) json.RawMessage) (req T, meta metadata.Metadata, ok bool) {
	req, err := web.Decode[T](w, r)
	if err == nil {
		meta, err = metadata.FromJSON(metaOf(req))
	}
	if err != nil {
		web.WriteProblem(w, r, err)
		return req, nil, false
	}
	return req, meta, true
}
