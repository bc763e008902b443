package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/metadata"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

// batchJSON is an atomic batch as the API answers it: its legs, each a transfer of its own.
type batchJSON struct {
	ID             string            `json:"id"`
	IdempotencyKey string            `json:"idempotency_key"`
	Status         string            `json:"status"`
	Transfers      []transferJSON    `json:"transfers"`
	Metadata       metadata.Metadata `json:"metadata"`
	CreatedAt      time.Time         `json:"created_at"`
	// OutboxStatus and Reversals are shown where a batch is read (GET), not where it is created.
	OutboxStatus *string   `json:"outbox_status,omitempty"`
	Reversals    *[]string `json:"reversals,omitempty"`
}

func toBatchJSON(b wallet.Batch, read bool) batchJSON {
	out := batchJSON{
		ID: b.ID.String(), IdempotencyKey: b.IdempotencyKey, Status: b.Status, Metadata: b.Metadata, CreatedAt: b.CreatedAt.UTC(),
		Transfers: make([]transferJSON, len(b.Legs)),
	}
	if out.Metadata == nil {
		out.Metadata = metadata.Metadata{}
	}
	for i, l := range b.Legs {
		out.Transfers[i] = toTransferJSON(l, read)
	}
	if read {
		out.OutboxStatus = &b.OutboxStatus
		ids := make([]string, len(b.Reversals))
		for i, id := range b.Reversals {
			ids[i] = id.String()
		}
		out.Reversals = &ids
	}
	return out
}

// batchReversalJSON is a batch reversal as the API answers it.
type batchReversalJSON struct {
	ID             string            `json:"id"`
	BatchID        string            `json:"batch_id"`
	IdempotencyKey string            `json:"idempotency_key"`
	Status         string            `json:"status"`
	Reversals      []transferJSON    `json:"reversals"`
	Metadata       metadata.Metadata `json:"metadata"`
	CreatedAt      time.Time         `json:"created_at"`
}

func toBatchReversalJSON(r wallet.BatchReversal) batchReversalJSON {
	out := batchReversalJSON{
		ID: r.ID.String(), BatchID: r.BatchID.String(), IdempotencyKey: r.IdempotencyKey, Status: r.Status,
		Metadata: r.Metadata, CreatedAt: r.CreatedAt.UTC(), Reversals: make([]transferJSON, len(r.Reversals)),
	}
	if out.Metadata == nil {
		out.Metadata = metadata.Metadata{}
	}
	for i, t := range r.Reversals {
		out.Reversals[i] = toTransferJSON(t, false)
	}
	return out
}

// handleCreateBatch writes an atomic batch of transfers: every leg or none. Its
// Idempotency-Key answers as a transfer's does (the first answer again, 201 with
// Idempotency-Replayed: true, for the same key and body; idempotency-key-reused for another; 409
// while in flight here), in a key space of its own; a refused batch keeps nothing under its key.
func handleCreateBatch(service wallet.Service) http.Handler {
	keys := newInFlight()
	type leg struct {
		FromWalletID string `json:"from_wallet_id"`
		ToWalletID   string `json:"to_wallet_id"`
		Amount       int64  `json:"amount"`
		Currency     string `json:"currency"`
		Reference    string `json:"reference"`
	}
	type request struct {
		Transfers []leg           `json:"transfers"`
		Metadata  json.RawMessage `json:"metadata"`
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
		batch := wallet.BatchRequest{IdempotencyKey: key, Metadata: meta, KeyID: p.KeyID, Legs: make([]wallet.BatchLegRequest, len(req.Transfers))}
		for i, l := range req.Transfers {
			batch.Legs[i] = wallet.BatchLegRequest{FromWalletID: l.FromWalletID, ToWalletID: l.ToWalletID, Amount: l.Amount, Currency: l.Currency, Reference: l.Reference}
		}
		b, replayed, err := service.CreateBatch(r.Context(), batch)
		if err != nil {
			writeLegProblem(w, r, err)
			return
		}
		logger := zerolog.Ctx(r.Context())
		logger.UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Str("batch_id", b.ID.String()) })
		if replayed {
			w.Header().Set(HeaderIdempotencyReplayed, "true")
			logger.Debug().Msg("transfer batch replayed")
		} else {
			logger.Info().Str("event_id", b.EventID.String()).Int("legs", len(b.Legs)).Msg("transfer batch created")
		}
		web.Encode(w, r, http.StatusCreated, toBatchJSON(b, false))
	})
}

// handleGetBatch answers a batch with its legs and its reversals' ids.
func handleGetBatch(service wallet.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := wallet.ParseBatchID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		b, err := service.GetBatch(r.Context(), id)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		web.Encode(w, r, http.StatusOK, toBatchJSON(b, true))
	})
}

// handleReverseBatch reverses the legs the body names (every leg when it names none) of a
// batch, each in full, all or none. Idempotent as a batch is, in a key space of its own.
func handleReverseBatch(service wallet.Service) http.Handler {
	keys := newInFlight()
	type request struct {
		Transfers []string        `json:"transfers"` // nil: every leg
		Metadata  json.RawMessage `json:"metadata"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		batchID, err := wallet.ParseBatchID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		req, meta, ok := decodeWithMetadata(w, r, func(req request) json.RawMessage { return req.Metadata })
		if !ok {
			return
		}
		p, _ := auth.FromContext(r.Context())
		rev := wallet.BatchReversalRequest{IdempotencyKey: r.Header.Get("Idempotency-Key"), BatchID: batchID, Metadata: meta, KeyID: p.KeyID}
		if req.Transfers != nil {
			rev.Legs = make([]uuid.UUID, len(req.Transfers))
			for i, s := range req.Transfers {
				id, err := uuid.Parse(s)
				if err != nil || len(s) != 36 {
					writeLegProblem(w, r, &wallet.LegError{Leg: i, Err: problem.Newf(wallet.ErrInvalid, "/transfers/%d: %q is not a transfer id", i, s)})
					return
				}
				rev.Legs[i] = id
			}
		}
		_, release, ok := claimKey(w, r, keys)
		if !ok {
			return
		}
		defer release()
		out, replayed, err := service.ReverseBatch(r.Context(), rev)
		if err != nil {
			writeLegProblem(w, r, err)
			return
		}
		logger := zerolog.Ctx(r.Context())
		logger.UpdateContext(func(c zerolog.Context) zerolog.Context {
			return c.Str("batch_id", batchID.String()).Str("batch_reversal_id", out.ID.String())
		})
		if replayed {
			w.Header().Set(HeaderIdempotencyReplayed, "true")
			logger.Debug().Msg("batch reversal replayed")
		} else {
			logger.Info().Str("event_id", out.EventID.String()).Int("legs", len(out.Reversals)).Msg("transfer batch reversed")
		}
		web.Encode(w, r, http.StatusCreated, toBatchReversalJSON(out))
	})
}

// legProblem is a problem about one leg of a batch: "leg" is its index in the request's
// transfers (0-based).
type legProblem struct {
	web.Problem
	Leg int `json:"leg"`
}

// writeLegProblem writes err's problem, with the extension member "leg" when err is about one
// leg (wallet.LegError).
func writeLegProblem(w http.ResponseWriter, r *http.Request, err error) {
	var legErr *wallet.LegError
	if !errors.As(err, &legErr) {
		writeInFlight(w, r, err)
		return
	}
	status, doc := web.ProblemOf(r, err)
	w.Header().Set("Content-Type", web.ContentTypeProblem)
	w.WriteHeader(status)
	// The status is sent; a client that went away is not worth an error.
	_ = json.NewEncoder(w).Encode(legProblem{Problem: doc, Leg: legErr.Leg})
}
