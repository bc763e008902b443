package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/auth"
	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/problem"
	"walletgl/internal/web"
)

// HeaderIdempotencyReplayed is "true" on an answer that replays an earlier request with the
// same Idempotency-Key and body, as the wallet's.
const HeaderIdempotencyReplayed = "Idempotency-Replayed"

// AuditByKey records an action in the audit trail as the API key of the request ctx belongs
// to, in db (the transaction of the change): what postgres.Ledger.WithAudit takes for the
// changes this API makes. A context without a key records nothing and fails the change.
func AuditByKey(ctx context.Context, db database.Executor, action, target string, detail any) error {
	p, ok := auth.FromContext(ctx)
	if !ok {
		return errors.New("audit " + action + ": the request has no API key")
	}
	return auth.Audit(ctx, db, auth.ActorOf(p), action, target, detail)
}

// handleCreateAdjustment posts a manual adjustment: one balanced entry the client gives line by
// line, with a reason. Its Idempotency-Key answers as the wallet's transfers do: the first
// answer again (201, Idempotency-Replayed: true) for the same key and body, 422
// idempotency-key-reused for another body.
func handleCreateAdjustment(adjuster gl.Adjuster) http.Handler {
	type line struct {
		Account  string `json:"account"`
		Debit    int64  `json:"debit"`
		Credit   int64  `json:"credit"`
		WalletID string `json:"wallet_id"`
	}
	type request struct {
		Reason      string     `json:"reason"`
		Currency    string     `json:"currency"`
		Lines       []line     `json:"lines"`
		EffectiveAt *time.Time `json:"effective_at"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := web.Decode[request](w, r)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		if adjuster == nil {
			web.WriteProblem(w, r, problem.Newf(gl.ErrUnavailable, "this GL posts no adjustments"))
			return
		}
		p, _ := auth.FromContext(r.Context())
		adj := gl.AdjustmentRequest{
			IdempotencyKey: r.Header.Get("Idempotency-Key"), Reason: req.Reason, Currency: req.Currency,
			EffectiveAt: req.EffectiveAt, KeyID: p.KeyID,
		}
		for _, l := range req.Lines {
			adj.Lines = append(adj.Lines, gl.AdjustmentLine{AccountCode: l.Account, Debit: l.Debit, Credit: l.Credit, WalletID: l.WalletID})
		}
		a, replayed, err := adjuster.Adjust(r.Context(), adj)
		if err != nil {
			web.WriteProblem(w, r, err)
			return
		}
		logger := zerolog.Ctx(r.Context())
		if replayed {
			w.Header().Set(HeaderIdempotencyReplayed, "true")
			logger.Debug().Str("adjustment_id", a.ID.String()).Msg("adjustment replayed")
		} else {
			logger.Info().Str("adjustment_id", a.ID.String()).Str("entry_id", a.Entry.ID.String()).Msg("adjustment posted")
		}
		web.Encode(w, r, http.StatusCreated, entriesJSON([]gl.Entry{a.Entry})[0])
	})
}
