package httpapi

import (
	"net/http"

	"walletgl/internal/auth"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

// addRoutes is the whole API surface of the wallet service, each route with the scope an API
// key needs for it; the probes (/livez, /readyz, /healthz) and the API's description
// (/openapi.json, which documents every route here) alone are open. A query parameter its
// operation in openapi.json does not list is refused (invalid-query), on every route.
func addRoutes(serveMux *http.ServeMux, d Deps) {
	mux := web.MustRoutes(serveMux, openAPI) // each route takes the query parameters openapi.json lists
	need := func(scope auth.Scope, h http.Handler) http.Handler { return d.Guard.Require(scope, actFor(h)) }
	web.Probes(mux, d.Health...)
	web.OpenAPI(mux, openAPI)
	if d.MetricsOnAPI {
		mux.Handle("GET /metrics", need(auth.MetricsRead, d.Metrics.Handler()))
	}
	mux.Handle("POST /v1/wallets", need(ScopeWalletsWrite, handleCreateWallet(d.Service)))
	mux.Handle("GET /v1/wallets", need(ScopeWalletsRead, handleListWallets(d.Service)))
	mux.Handle("GET /v1/wallets/{id}", need(ScopeWalletsRead, handleGetWallet(d.Service)))
	mux.Handle("PATCH /v1/wallets/{id}", need(ScopeWalletsAdmin, handleUpdateWallet(d.Service)))
	mux.Handle("POST /v1/transfers", need(ScopeTransfersWrite, handleCreateTransfer(d.Service, d.Metrics.Transfers())))
	mux.Handle("GET /v1/transfers/{id}", need(ScopeTransfersRead, handleGetTransfer(d.Service)))
	mux.Handle("GET /v1/transfers", need(ScopeTransfersRead, handleListTransfers(d.Service)))
	mux.Handle("POST /v1/transfers/{id}/reversal", need(ScopeTransfersWrite, handleReverseTransfer(d.Service)))
	mux.Handle("GET /v1/transfers/{id}/reversals", need(ScopeTransfersRead, handleListReversals(d.Service)))
	mux.Handle("POST /v1/transfer-batches", need(ScopeTransfersWrite, handleCreateBatch(d.Service)))
	mux.Handle("GET /v1/transfer-batches/{id}", need(ScopeTransfersRead, handleGetBatch(d.Service)))
	mux.Handle("POST /v1/transfer-batches/{id}/reversals", need(ScopeTransfersWrite, handleReverseBatch(d.Service)))
	mux.Handle("POST /v1/holds", need(ScopeTransfersWrite, handlePlaceHold(d.Service)))
	mux.Handle("GET /v1/holds/{id}", need(ScopeTransfersRead, handleGetHold(d.Service)))
	mux.Handle("GET /v1/holds", need(ScopeTransfersRead, handleListHolds(d.Service)))
	mux.Handle("POST /v1/holds/{id}/capture", need(ScopeTransfersWrite, handleCaptureHold(d.Service)))
	mux.Handle("POST /v1/holds/{id}/void", need(ScopeTransfersWrite, handleVoidHold(d.Service)))
	mux.Handle("GET /v1/admin/outbox", need(ScopeOutboxAdmin, handleAdminOutbox(d.Admin)))
	mux.Handle("POST /v1/admin/outbox/requeue", need(ScopeOutboxAdmin, handleAdminRequeue(d.Admin, d.Audit)))
	if d.Console != nil {
		mux.Handle("/console/", d.Console) // HTML for people, outside the OpenAPI document
	}
}

// The wallet's scopes (auth.WalletScopes).
const (
	ScopeWalletsRead    auth.Scope = "wallets:read"
	ScopeWalletsWrite   auth.Scope = "wallets:write"
	ScopeWalletsAdmin   auth.Scope = "wallets:admin" // to create a wallet that may go negative or has a credit line, and to change limits or metadata
	ScopeTransfersRead  auth.Scope = "transfers:read"
	ScopeTransfersWrite auth.Scope = "transfers:write"
	ScopeTransfersAdmin auth.Scope = "transfers:admin" // to force a reversal past the receiver's minimum (a chargeback)
	ScopeOutboxAdmin    auth.Scope = "outbox:admin"
	ScopeInboxAdmin     auth.Scope = "inbox:admin" // the console's retry of failed inbox events
)

// actFor serves h as the actor of the request's API key (wallet.WithActor): its owner, and
// whether it may debit a wallet that may go negative (wallets:admin).
func actFor(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(wallet.WithActor(r.Context(), actorOf(r))))
	})
}

// actorOf is the actor of the request's API key.
func actorOf(r *http.Request) wallet.Actor {
	p, _ := auth.FromContext(r.Context())
	return wallet.Actor{Owner: p.Owner, Funding: p.Has(ScopeWalletsAdmin)}
}
