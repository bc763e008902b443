package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/metadata"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

// holdJSON is a hold as the API shows it; the fields of a finished hold appear once it is.
type holdJSON struct {
	ID             string    `json:"id"`
	IdempotencyKey string    `json:"idempotency_key"`
	WalletID       string    `json:"wallet_id"`
	Amount         int64     `json:"amount"`
	Currency       string    `json:"currency"`
	Status         string    `json:"status"`
	ExpiresAt      time.Time `json:"expires_at"`
	CreatedAt      time.Time `json:"created_at"`
	// Metadata are the client's key-value pairs; {} when none were given.
	Metadata metadata.Metadata `json:"metadata"`
	// Captured holds only.
	CapturedAmount    *int64  `json:"captured_amount,omitempty"`
	CaptureTransferID *string `json:"capture_transfer_id,omitempty"`
	ToWalletID        *string `json:"to_wallet_id,omitempty"`
	// Voided holds only.
	VoidReason *string `json:"void_reason,omitempty"`
	// Captured and voided holds.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

func toHoldJSON(h wallet.Hold) holdJSON {
	out := holdJSON{
		ID: h.ID.String(), IdempotencyKey: h.IdempotencyKey, WalletID: h.WalletID,
		Amount: h.Amount, Currency: h.Currency, Status: h.Status,
		ExpiresAt: h.ExpiresAt.UTC(), CreatedAt: h.CreatedAt.UTC(), Metadata: h.Metadata,
	}
	if out.Metadata == nil {
		out.Metadata = metadata.Metadata{}
	}
	switch h.Status {
	case wallet.HoldCaptured:
		id := h.CaptureTransferID.String()
		out.CapturedAmount, out.CaptureTransferID, out.ToWalletID = &h.CapturedAmount, &id, &h.ToWalletID
	case wallet.HoldVoided:
		out.VoidReason = &h.VoidReason
	}
	if !h.FinishedAt.IsZero() {
		finished := h.FinishedAt.UTC()
		out.FinishedAt = &finished
	}
	return out
}

// claimKey marks the request's Idempotency-Key in flight in keys until release; a key already
// in flight is answered 409 idempotency-key-in-flight with a Retry-After (ok is then false).
// A missing key is left to the store, which refuses it as an invalid request.
func claimKey(w http.ResponseWriter, r *http.Request, keys *inFlight) (key string, release func(), ok bool) {
	key = r.Header.Get("Idempotency-Key")
	if key == "" {
		return "", func() {}, true
	}
	release, ok = keys.claim(actorOf(r).Owner + "\x00" + key) // keys are per owner
	if !ok {
		writeInFlight(w, r, problem.Newf(wallet.ErrIdempotencyKeyInFlight, "a request with this Idempotency-Key is still being processed; retry after %s s", inFlightRetryAfter))
		return "", nil, false
	}
	return key, release, true
}

// handlePlaceHold reserves an amount of a wallet. Its Idempotency-Key answers as a transfer's
// does: the first answer again (201, Idempotency-Replayed: true) for the same key and body,
// idempotency-key-reused for another body, 409 while in flight here.
func handlePlaceHold(service wallet.HoldService) http.Handler {
	keys := newInFlight()
	type request struct {
		WalletID  string     `json:"wallet_id"`
		Amount    int64      `json:"amount"`
		Currency  string     `json:"currency"`
		ExpiresIn *int64     `json:"expires_in"` // seconds
		ExpiresAt *time.Time `json:"expires_at"`
		// Metadata is read by metadata.FromJSON, which names what is wrong with it.
		Metadata json.RawMessage `json:"metadata"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, meta, ok := decodeWithMetadata(w, r, func(req request) json.RawMessage { return req.Metadata })
		if !ok {
			return
		}
		key, release, ok := claimKey(w, r, keys)
		if !ok {
			return
		}
		defer release()
		p, _ := auth.FromContext(r.Context())
		hr := wallet.HoldRequest{IdempotencyKey: key, WalletID: req.WalletID, Amount: req.Amount, Currency: req.Currency, Metadata: meta, KeyID: p.KeyID}
		if req.ExpiresAt != nil {
			hr.ExpiresAt = *req.ExpiresAt
		}
		if req.ExpiresIn != nil {
			if *req.ExpiresIn <= 0 || *req.ExpiresIn > int64(wallet.MaxHoldLifetime/time.Second) {
				web.WriteProblem(w, r, problem.Newf(wallet.ErrInvalid, "expires_in must be from 1 to %d seconds", int64(wallet.MaxHoldLifetime/time.Second)))
				return
			}
			hr.ExpiresIn = time.Duration(*req.ExpiresIn) * time.Second
		}
		h, replayed, err := service.PlaceHold(r.Context(), hr)
		if err != nil {
			writeInFlight(w, r, err)
			return
		}
		logger := zerolog.Ctx(r.Context())
		logger.UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Str("hold_id", h.ID.String()) })
		if replayed {
			w.Header().Set(HeaderIdempotencyReplayed, "true")
			logger.Debug().Msg("hold replayed")
		} else {
			logger.Info().Str("wallet_id", h.WalletID).Int64("amount", h.Amount).Msg("hold placed")
		}
		web.Encode(w, r, http.StatusCreated, toHoldJSON(h))
	})
}

func handleGetHold(service wallet.HoldService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := wallet.ParseHoldID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		h, err := service.GetHold(r.Context(), id)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		web.Encode(w, r, http.StatusOK, toHoldJSON(h))
	})
}

// handleCaptureHold completes a pending hold as a transfer to to_wallet_id, of amount (the
// whole hold when absent). Its Idempotency-Key is the transfer's and answers as a transfer's.
func handleCaptureHold(service wallet.HoldService) http.Handler {
	keys := newInFlight()
	type request struct {
		ToWalletID string `json:"to_wallet_id"`
		Amount     *int64 `json:"amount"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := wallet.ParseHoldID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		req, err := web.Decode[request](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		var amount int64 // 0: the whole hold
		if req.Amount != nil {
			if *req.Amount <= 0 {
				web.WriteProblem(w, r, problem.Newf(wallet.ErrInvalid, "amount must be a whole number of minor units from 1, got %d", *req.Amount))
				return
			}
			amount = *req.Amount
		}
		key, release, ok := claimKey(w, r, keys)
		if !ok {
			return
		}
		defer release()
		p, _ := auth.FromContext(r.Context())
		h, replayed, err := service.CaptureHold(r.Context(), wallet.CaptureRequest{
			IdempotencyKey: key, HoldID: id, ToWalletID: req.ToWalletID, Amount: amount, KeyID: p.KeyID,
		})
		if err != nil {
			writeInFlight(w, r, err)
			return
		}
		logger := zerolog.Ctx(r.Context())
		logger.UpdateContext(func(c zerolog.Context) zerolog.Context {
			return c.Str("hold_id", h.ID.String()).Str("transfer_id", h.CaptureTransferID.String())
		})
		if replayed {
			w.Header().Set(HeaderIdempotencyReplayed, "true")
			logger.Debug().Msg("capture replayed")
		} else {
			logger.Info().Int64("captured_amount", h.CapturedAmount).Msg("hold captured")
		}
		web.Encode(w, r, http.StatusCreated, toHoldJSON(h))
	})
}

// handleVoidHold releases a pending hold; a hold already voided answers 200 as it is (a void
// is idempotent without a key), a captured one 409 hold-not-pending.
func handleVoidHold(service wallet.HoldService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := wallet.ParseHoldID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		h, err := service.VoidHold(r.Context(), id)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		zerolog.Ctx(r.Context()).Info().Str("hold_id", h.ID.String()).Str("reason", h.VoidReason).Msg("hold voided")
		web.Encode(w, r, http.StatusOK, toHoldJSON(h))
	})
}

// handleListHolds pages through the holds, oldest first, like GET /v1/transfers: every hold
// (the listing the GL's reconcile compares with its hold entries), or those whose metadata
// hold the pairs of metadata[<key>]=<value>.
func handleListHolds(service wallet.HoldService) http.Handler {
	type response struct {
		Holds      []holdJSON `json:"holds"`
		NextCursor *string    `json:"next_cursor"` // null on the last page
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, limit, err := pageQuery(r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		query, _ := web.Query(r) // pageQuery parsed it
		filter, err := metadata.FromQuery(query)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		page, err := service.ListHolds(r.Context(), wallet.HoldQuery{After: after, Limit: limit, Metadata: filter})
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		out := response{Holds: make([]holdJSON, 0, len(page.Holds))}
		if next := page.Next.String(); next != "" {
			out.NextCursor = &next
		}
		for _, h := range page.Holds {
			out.Holds = append(out.Holds, toHoldJSON(h))
		}
		web.Encode(w, r, http.StatusOK, out)
	})
}
