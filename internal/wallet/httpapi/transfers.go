package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/metadata"
	"walletgl/internal/metrics"
	"walletgl/internal/problem"
	"walletgl/internal/wallet"
	"walletgl/internal/web"
)

type transferJSON struct {
	ID             string `json:"id"`
	IdempotencyKey string `json:"idempotency_key"`
	FromWalletID   string `json:"from_wallet_id"`
	ToWalletID     string `json:"to_wallet_id"`
	Amount         int64  `json:"amount"`
	Currency       string `json:"currency"`
	Reference      string `json:"reference,omitempty"`
	// Metadata are the client's key-value pairs; {} when none were given.
	Metadata  metadata.Metadata `json:"metadata"`
	Status    string            `json:"status"`
	CreatedAt time.Time         `json:"created_at"`
	// OutboxStatus is shown where a transfer is read, not where it is created.
	OutboxStatus *string `json:"outbox_status,omitempty"`
	// ReversesTransferID is set on a reversal: the transfer it reverses.
	ReversesTransferID *string `json:"reverses_transfer_id,omitempty"`
	// HoldID is set on a capture's transfer: the hold it completes.
	HoldID *string `json:"hold_id,omitempty"`
	// Forced is set on a reversal that took its from-wallet below its minimum.
	Forced bool `json:"forced,omitempty"`
	// ReversedAmount is the total of the transfer's reversals, shown where a transfer (not a
	// reversal) is read.
	ReversedAmount *int64 `json:"reversed_amount,omitempty"`
	// Reversals are shown where one transfer is read (GET /v1/transfers/{id}).
	Reversals []reversalJSON `json:"reversals,omitempty"`
	// BatchID is set on a leg of a batch: its batch (/v1/transfer-batches/{id}).
	BatchID *string `json:"batch_id,omitempty"`
	// BatchReversalID is set on a reversal a batch reversal made.
	BatchReversalID *string `json:"batch_reversal_id,omitempty"`
}

// reversalJSON is a reversal as its transfer lists it; the whole reversal is a transfer of its
// own (GET /v1/transfers/{reversal id}).
type reversalJSON struct {
	ID        string    `json:"id"`
	Amount    int64     `json:"amount"`
	CreatedAt time.Time `json:"created_at"`
}

func toTransferJSON(t wallet.Transfer, withOutbox bool) transferJSON {
	out := transferJSON{
		ID: t.ID.String(), IdempotencyKey: t.IdempotencyKey,
		FromWalletID: t.FromWalletID, ToWalletID: t.ToWalletID,
		Amount: t.Amount, Currency: t.Currency, Reference: t.Reference, Metadata: t.Metadata, Status: t.Status, CreatedAt: t.CreatedAt.UTC(),
		Forced: t.Forced,
	}
	if out.Metadata == nil {
		out.Metadata = metadata.Metadata{}
	}
	if withOutbox {
		out.OutboxStatus = &t.OutboxStatus
		if !t.IsReversal() {
			out.ReversedAmount = &t.ReversedAmount
		}
	}
	if t.IsReversal() {
		id := t.ReversesTransferID.String()
		out.ReversesTransferID = &id
	}
	if t.HoldID != uuid.Nil {
		id := t.HoldID.String()
		out.HoldID = &id
	}
	if t.BatchID != uuid.Nil {
		id := t.BatchID.String()
		out.BatchID = &id
	}
	if t.BatchReversalID != uuid.Nil {
		id := t.BatchReversalID.String()
		out.BatchReversalID = &id
	}
	for _, r := range t.Reversals {
		out.Reversals = append(out.Reversals, reversalJSON{ID: r.ID.String(), Amount: r.Amount, CreatedAt: r.CreatedAt.UTC()})
	}
	return out
}

// The headers of the transfer's idempotency answers.
const (
	// HeaderIdempotencyReplayed is "true" on an answer that replays an earlier request with the
	// same Idempotency-Key and body.
	HeaderIdempotencyReplayed = "Idempotency-Replayed"
	// inFlightRetryAfter is the Retry-After, in seconds, of a 409 idempotency-key-in-flight: a
	// transfer commits within a few milliseconds, so a second is plenty.
	inFlightRetryAfter = "1"
)

// inFlight holds the Idempotency-Keys whose requests this process is still answering: another
// request with one of them is answered 409 at once instead of waiting for the first (another
// instance's request with the key waits for it in the database and then replays it).
type inFlight struct {
	mu   sync.Mutex
	keys map[string]struct{}
}

func newInFlight() *inFlight { return &inFlight{keys: map[string]struct{}{}} }

// claim marks key in flight until release is called; false when it already is.
func (f *inFlight) claim(key string) (release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, busy := f.keys[key]; busy {
		return nil, false
	}
	f.keys[key] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.keys, key)
	}, true
}

func handleCreateTransfer(service wallet.Service, m *metrics.Wallet) http.Handler {
	keys := newInFlight()
	type request struct {
		FromWalletID string `json:"from_wallet_id"`
		ToWalletID   string `json:"to_wallet_id"`
		Amount       int64  `json:"amount"`
		Currency     string `json:"currency"`
		Reference    string `json:"reference"`
		// Metadata is read by metadata.FromJSON, which names what is wrong with it.
		Metadata json.RawMessage `json:"metadata"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[request](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		meta, err := metadata.FromJSON(req.Metadata)
		if err != nil {
			m.Transfer(transferResult(err))
			web.WriteProblem(w, r, err)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if key != "" { // a missing key is the store's invalid request
			release, ok := keys.claim(actorOf(r).Owner + "\x00" + key) // keys are per owner
			if !ok {
				m.Transfer(transferResult(wallet.ErrIdempotencyKeyInFlight))
				writeInFlight(w, r, problem.Newf(wallet.ErrIdempotencyKeyInFlight, "a request with this Idempotency-Key is still being processed; retry after %s s", inFlightRetryAfter))
				return
			}
			defer release()
		}
		p, _ := auth.FromContext(r.Context())
		t, replayed, err := service.CreateTransfer(r.Context(), wallet.TransferRequest{
			IdempotencyKey: key,
			FromWalletID:   req.FromWalletID, ToWalletID: req.ToWalletID,
			Amount: req.Amount, Currency: req.Currency, Reference: req.Reference, Metadata: meta, KeyID: p.KeyID,
		})
		if err != nil {
			m.Transfer(transferResult(err))
			writeInFlight(w, r, err)
			return
		}
		logger := zerolog.Ctx(r.Context())
		logger.UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Str("transfer_id", t.ID.String()) })
		if replayed {
			// The first request's answer again: its status, and a header saying it is a replay.
			w.Header().Set(HeaderIdempotencyReplayed, "true")
			m.Transfer("replayed")
			logger.Debug().Msg("transfer replayed")
		} else {
			m.Transfer("created")
			logger.Info().Str("event_id", t.EventID.String()).Msg("transfer created")
		}
		web.Encode(w, r, http.StatusCreated, toTransferJSON(t, false))
	})
}

// handleReverseTransfer reverses a completed transfer in full or in part; a body without an
// amount reverses the rest (what its reversals have not moved back yet). Its Idempotency-Key
// answers as a transfer's does: the first answer again (201, Idempotency-Replayed: true) for
// the same key and body, idempotency-key-reused for another body, 409 while in flight here.
func handleReverseTransfer(service wallet.Service) http.Handler {
	keys := newInFlight()
	type request struct {
		Amount *int64 `json:"amount"` // nil: the rest
		Force  bool   `json:"force"`  // a chargeback: needs transfers:admin
		// Metadata is read by metadata.FromJSON, which names what is wrong with it.
		Metadata json.RawMessage `json:"metadata"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transferID, err := wallet.ParseTransferID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		req, meta, ok := decodeWithMetadata(w, r, func(req request) json.RawMessage { return req.Metadata })
		if !ok {
			return
		}
		if p, _ := auth.FromContext(r.Context()); req.Force && !p.Has(ScopeTransfersAdmin) {
			web.WriteProblem(w, r, problem.Newf(auth.ErrForbidden, "a forced reversal needs an API key with the scope %s", ScopeTransfersAdmin))
			return
		}
		key := r.Header.Get("Idempotency-Key")
		if key != "" { // a missing key is the store's invalid request
			release, ok := keys.claim(actorOf(r).Owner + "\x00" + key) // keys are per owner
			if !ok {
				writeInFlight(w, r, problem.Newf(wallet.ErrIdempotencyKeyInFlight, "a request with this Idempotency-Key is still being processed; retry after %s s", inFlightRetryAfter))
				return
			}
			defer release()
		}
		p, _ := auth.FromContext(r.Context())
		rev := wallet.ReversalRequest{IdempotencyKey: key, TransferID: transferID, Rest: req.Amount == nil, Force: req.Force, Metadata: meta, KeyID: p.KeyID}
		if req.Amount != nil {
			rev.Amount = *req.Amount
		}
		t, replayed, err := service.ReverseTransfer(r.Context(), rev)
		if err != nil {
			writeInFlight(w, r, err)
			return
		}
		logger := zerolog.Ctx(r.Context())
		logger.UpdateContext(func(c zerolog.Context) zerolog.Context {
			return c.Str("transfer_id", transferID.String()).Str("reversal_id", t.ID.String())
		})
		if replayed {
			w.Header().Set(HeaderIdempotencyReplayed, "true")
			logger.Debug().Msg("reversal replayed")
		} else {
			logger.Info().Str("event_id", t.EventID.String()).Int64("amount", t.Amount).Msg("transfer reversed")
		}
		web.Encode(w, r, http.StatusCreated, toTransferJSON(t, false))
	})
}

// handleListReversals lists a transfer's reversals, oldest first, each a whole transfer.
func handleListReversals(service wallet.Service) http.Handler {
	type response struct {
		Reversals []transferJSON `json:"reversals"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := wallet.ParseTransferID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		reversals, err := service.ListReversals(r.Context(), id)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		out := response{Reversals: make([]transferJSON, 0, len(reversals))}
		for _, t := range reversals {
			out.Reversals = append(out.Reversals, toTransferJSON(t, true))
		}
		web.Encode(w, r, http.StatusOK, out)
	})
}

// writeInFlight writes err's problem, with a Retry-After when it says the key is in flight and
// Idempotency-Replayed: true when it is a refusal kept under the key, answered again.
func writeInFlight(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, wallet.ErrIdempotencyKeyInFlight) {
		w.Header().Set("Retry-After", inFlightRetryAfter)
	}
	var replayed *wallet.ReplayedRefusal
	if errors.As(err, &replayed) {
		w.Header().Set(HeaderIdempotencyReplayed, "true")
	}
	web.WriteProblem(w, r, err)
}

func handleGetTransfer(service wallet.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := wallet.ParseTransferID(r.PathValue("id"))
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		t, err := service.GetTransfer(r.Context(), id)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		web.Encode(w, r, http.StatusOK, toTransferJSON(t, true))
	})
}

// pageQuery reads a listing's page from the query string: the cursor after which it starts
// and how many rows it holds.
func pageQuery(r *http.Request) (wallet.Cursor, int, error) {
	query, err := web.Query(r)
	if err != nil {
		return wallet.Cursor{}, 0, err
	}
	after, err := wallet.ParseCursor(query.Get("after"))
	if err != nil {
		return wallet.Cursor{}, 0, err
	}
	limit, err := web.Limit(query, wallet.DefaultListLimit, wallet.MaxListLimit)
	if err != nil {
		return wallet.Cursor{}, 0, err
	}
	return after, limit, nil
}

// handleListTransfers pages through the transfers, oldest first, for reconciliation: all of
// them, those from or to one wallet (wallet_id), those of one reference (reference), or both.
func handleListTransfers(service wallet.Service) http.Handler {
	type response struct {
		Transfers  []transferJSON `json:"transfers"`
		NextCursor *string        `json:"next_cursor"` // null on the last page
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
		q := wallet.TransferQuery{After: after, Limit: limit, WalletID: query.Get("wallet_id"), Reference: query.Get("reference"), Metadata: filter}
		if query.Has("batch_id") {
			id, err := uuid.Parse(query.Get("batch_id"))
			if err != nil || len(query.Get("batch_id")) != 36 {
				web.WriteProblem(w, r, problem.Newf(web.ErrInvalidQuery, "batch_id must be a transfer batch's id, a UUID"))
				return
			}
			q.BatchID = id
		}
		for _, name := range []string{"wallet_id", "reference"} {
			if query.Has(name) && query.Get(name) == "" {
				web.WriteProblem(w, r, problem.Newf(web.ErrInvalidQuery, "%s must not be empty; leave it out to list every transfer", name))
				return
			}
		}
		page, err := service.ListTransfers(r.Context(), q)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		out := response{Transfers: make([]transferJSON, 0, len(page.Transfers))}
		if next := page.Next.String(); next != "" {
			out.NextCursor = &next
		}
		for _, t := range page.Transfers {
			out.Transfers = append(out.Transfers, toTransferJSON(t, true))
		}
		web.Encode(w, r, http.StatusOK, out)
	})
}

// transferResult names a refused transfer for the metrics: refused when the request or the
// rules said no (a 4xx), failed when the service could not answer (unavailable, internal).
func transferResult(err error) string {
	var appErr *problem.Error
	if errors.As(err, &appErr) && appErr.Kind != problem.Internal && appErr.Kind != problem.Unavailable {
		return "refused"
	}
	return "failed"
}
