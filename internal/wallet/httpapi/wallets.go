package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/database"
	"walletgl/internal/metadata"
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
	MinBalance    *int64  `json:"min_balance"`   // null: none (allow_negative)
	MaxBalance    *int64  `json:"max_balance"`   // null: none
	BelowMinimum  int64   `json:"below_minimum"` // how far available is below min_balance: > 0 only after a forced reversal
	Owner         *string `json:"owner"`         // null: a wallet of the platform
	// Metadata are the client's key-value pairs; {} when none were given.
	Metadata metadata.Metadata `json:"metadata"`
}

func toWalletJSON(w wallet.Wallet) walletJSON {
	out := walletJSON{
		ID: w.ID, Currency: w.Currency, Balance: w.Balance, Held: w.Held, Available: w.Available(),
		AllowNegative: w.AllowNegative, MaxBalance: w.MaxBalance, BelowMinimum: w.BelowMinimum(),
		Metadata: w.Metadata,
	}
	if out.Metadata == nil {
		out.Metadata = metadata.Metadata{}
	}
	if !w.AllowNegative {
		out.MinBalance = &w.MinBalance
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
		MinBalance    *int64 `json:"min_balance"` // nil: 0, or none with allow_negative
		MaxBalance    *int64 `json:"max_balance"` // nil: none
		// Metadata is read by metadata.FromJSON, which names what is wrong with it.
		Metadata json.RawMessage `json:"metadata"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, meta, ok := decodeWithMetadata(w, r, func(req request) json.RawMessage { return req.Metadata })
		if !ok {
			return
		}
		if p, _ := auth.FromContext(r.Context()); req.AllowNegative && !p.Has(ScopeWalletsAdmin) {
			// A wallet that may go negative creates money: only an administrator makes one.
			web.WriteProblem(w, r, problem.Newf(auth.ErrForbidden, "a wallet with allow_negative needs an API key with the scope %s", ScopeWalletsAdmin))
			return
		}
		if req.AllowNegative && req.MinBalance != nil {
			web.WriteProblem(w, r, problem.Newf(wallet.ErrInvalid, "a wallet with allow_negative has no minimum: min_balance must be null or absent"))
			return
		}
		if p, _ := auth.FromContext(r.Context()); req.MinBalance != nil && *req.MinBalance < 0 && !p.Has(ScopeWalletsAdmin) {
			// A credit line lets the wallet spend money it does not hold, as a funding wallet does.
			web.WriteProblem(w, r, problem.Newf(auth.ErrForbidden, "a wallet with a min_balance below 0 needs an API key with the scope %s", ScopeWalletsAdmin))
			return
		}
		limits := wallet.Limits{MaxBalance: req.MaxBalance}
		if req.MinBalance != nil {
			limits.MinBalance = *req.MinBalance
		}
		created, err := service.CreateWallet(r.Context(), wallet.Wallet{
			ID: req.ID, Currency: req.Currency, AllowNegative: req.AllowNegative, Limits: limits, Metadata: meta,
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

// optionalLimit is a limit of a PATCH body: absent (set false) leaves it, null (value nil)
// resets it to its default, a number sets it.
type optionalLimit struct {
	set   bool
	value *int64
}

func (o *optionalLimit) UnmarshalJSON(b []byte) error {
	o.set = true
	if string(b) == "null" {
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	o.value = &n
	return nil
}

// handleUpdateWallet changes a wallet's limits and metadata: each limit given replaces its limit
// (null: the default, a minimum of 0 or no maximum), metadata given replaces the whole map
// (null or {}: none), what is left out stays. Each change is audited.
func handleUpdateWallet(service wallet.Service) http.Handler {
	type request struct {
		MinBalance optionalLimit `json:"min_balance"`
		MaxBalance optionalLimit `json:"max_balance"`
		// Metadata is read by metadata.FromJSON; absent (nil) leaves the metadata as they are.
		Metadata json.RawMessage `json:"metadata"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[request](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		ch := wallet.WalletChange{
			LimitsChange: wallet.LimitsChange{SetMin: req.MinBalance.set, SetMax: req.MaxBalance.set},
			SetMetadata:  req.Metadata != nil, // a member given as null decodes as "null", not nil
		}
		if !ch.ChangesLimits() && !ch.SetMetadata {
			web.WriteProblem(w, r, problem.Newf(wallet.ErrInvalid, "the body must name min_balance, max_balance, metadata or several"))
			return
		}
		if req.MinBalance.value != nil {
			ch.MinBalance = *req.MinBalance.value
		}
		ch.MaxBalance = req.MaxBalance.value
		if ch.Metadata, err = metadata.FromJSON(req.Metadata); err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		changed, err := service.UpdateWallet(r.Context(), r.PathValue("id"), ch)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		zerolog.Ctx(r.Context()).Info().Str("wallet_id", changed.ID).Int64("min_balance", changed.MinBalance).
			Any("max_balance", changed.MaxBalance).Bool("metadata_set", ch.SetMetadata).Msg("wallet changed")
		web.Encode(w, r, http.StatusOK, toWalletJSON(changed))
	})
}

// handleListWallets pages through the wallets the key may see, newest first: all of them, or
// those whose metadata hold the pairs of metadata[<key>]=<value>.
func handleListWallets(service wallet.Service) http.Handler {
	type response struct {
		Wallets    []walletJSON `json:"wallets"`
		NextCursor *string      `json:"next_cursor"` // null on the last page
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query, err := web.Query(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		before, err := wallet.ParseWalletCursor(query.Get("after"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		limit, err := web.Limit(query, wallet.DefaultListLimit, wallet.MaxListLimit)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		filter, err := metadata.FromQuery(query)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		page, err := service.ListWallets(r.Context(), wallet.WalletQuery{Before: before, Limit: limit, Metadata: filter})
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		out := response{Wallets: make([]walletJSON, 0, len(page.Wallets))}
		if next := page.Next.String(); next != "" {
			out.NextCursor = &next
		}
		for _, found := range page.Wallets {
			out.Wallets = append(out.Wallets, toWalletJSON(found))
		}
		web.Encode(w, r, http.StatusOK, out)
	})
}

// AuditByKey records an action in the audit trail as the API key of the request ctx belongs
// to, in db (the transaction of the change): what postgres.Options.Audit takes for the changes
// this API makes. A context without a key records nothing and fails the change.
func AuditByKey(ctx context.Context, db database.Executor, action, target string, detail any) error {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return errors.New("audit " + action + ": the request has no API key")
	}
	return auth.Audit(ctx, db, auth.ActorOf(p), action, target, detail)
}
