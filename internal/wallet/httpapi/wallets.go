package httpapi

import (
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/money"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

type walletJSON struct {
	ID            string  `json:"id"`
	Currency      string  `json:"currency"`
	MinorUnits    *int    `json:"minor_units"` // null: a currency code the service no longer knows
	Balance       int64   `json:"balance"`
	Held          int64   `json:"held"`      // the total of the wallet's pending holds
	Available     int64   `json:"available"` // balance − held: what it may spend or hold
	AllowNegative bool    `json:"allow_negative"`
	Owner         *string `json:"owner"` // null: a wallet of the platform
}

func toWalletJSON(w wallet.Wallet) walletJSON {
	out := walletJSON{
		ID: w.ID, Currency: w.Currency, Balance: w.Balance, Held: w.Held, Available: w.Available(),
		AllowNegative: w.AllowNegative,
	}
	if w.Owner != "" {
		out.Owner = &w.Owner
	}
	if c, err := money.Parse(w.Currency); err == nil {
		out.MinorUnits = &c.MinorUnits
	}
	return out
}

func handleCreateWallet(service wallet.Service) http.Handler {
	type request struct {
		ID            string `json:"id"`
		Currency      string `json:"currency"`
		AllowNegative bool   `json:"allow_negative"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[request](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if p, _ := auth.FromContext(r.Context()); req.AllowNegative && !p.Has(ScopeWalletsAdmin) {
			// A wallet that may go negative creates money: only an administrator makes one.
			web.WriteProblem(w, r, problem.Newf(auth.ErrForbidden, "a wallet with allow_negative needs an API key with the scope %s", ScopeWalletsAdmin))
			return
		}
		created, err := service.CreateWallet(r.Context(), wallet.Wallet{
			ID: req.ID, Currency: req.Currency, AllowNegative: req.AllowNegative,
		})
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		zerolog.Ctx(r.Context()).Info().Str("wallet_id", created.ID).Str("currency", created.Currency).
			Bool("allow_negative", created.AllowNegative).Msg("wallet created")
		web.Encode(w, r, http.StatusCreated, toWalletJSON(created))
	})
}

func handleGetWallet(service wallet.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		found, err := service.GetWallet(r.Context(), r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		web.Encode(w, r, http.StatusOK, toWalletJSON(found))
	})
}
