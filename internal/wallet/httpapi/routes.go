package httpapi

import (
	"net/http"

	"walletgl/internal/events"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

// addRoutes is the whole API surface of the wallet service.
func addRoutes(mux *http.ServeMux, service wallet.Service, admin *events.Admin, health []web.Check) {
	mux.Handle("GET /healthz", web.Health(health...))
	mux.Handle("POST /v1/wallets", handleCreateWallet(service))
	mux.Handle("GET /v1/wallets/{id}", handleGetWallet(service))
	mux.Handle("POST /v1/transfers", handleCreateTransfer(service))
	mux.Handle("GET /v1/transfers/{id}", handleGetTransfer(service))
	mux.Handle("GET /v1/transfers", handleListTransfers(service))
	mux.Handle("GET /v1/admin/outbox", handleAdminOutbox(admin))
	mux.Handle("POST /v1/admin/outbox/requeue", handleAdminRequeue(admin))
}
