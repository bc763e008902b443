package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/internal/gldb"
)

var _ gl.Adjuster = (*Ledger)(nil)

// errAdjustUnaudited refuses an adjustment on a ledger without an audit trail (WithAudit): the
// books are never corrected by hand unrecorded.
var errAdjustUnaudited = errors.New("post adjustment: the ledger has no audit trail (WithAudit)")

// ActionAdjust is the audit trail's action of a posted adjustment; its target is the
// adjustment's key (gl.AdjustmentKey).
const ActionAdjust = "adjustment.post"

// Adjust posts req (gl.Adjuster) in one transaction: it claims the request's Idempotency-Key
// with the adjustment's row first, so that a concurrent request with the same key waits for
// this one and then answers from it; checks the lines against the chart of accounts
// (gl.AdjustmentRequest.Entry); posts the entry and its lines; and records the adjustment in
// the audit trail (WithAudit, action ActionAdjust). A key already held answers with its
// adjustment (replayed) when the request is the same, gl.ErrIdempotencyKeyReused otherwise. A
// refused request rolls back and keeps no key.
func (l *Ledger) Adjust(ctx context.Context, req gl.AdjustmentRequest) (gl.Adjustment, bool, error) {
	if l.audit == nil {
		return gl.Adjustment{}, false, errAdjustUnaudited
	}
	if err := req.Validate(); err != nil {
		return gl.Adjustment{}, false, err
	}
	if req.KeyID == uuid.Nil {
		return gl.Adjustment{}, false, errors.New("post adjustment: no API key asks for it")
	}
	id, err := uuid.NewV7()
	if err != nil {
		return gl.Adjustment{}, false, fmt.Errorf("new adjustment id: %w", err)
	}
	entryID, err := uuid.NewV7()
	if err != nil {
		return gl.Adjustment{}, false, fmt.Errorf("new entry id: %w", err)
	}
	hash := req.Hash()
	type result struct {
		adjustment gl.Adjustment
		replayed   bool
	}
	r, err := database.WithTxV(ctx, l.pool, func(tx pgx.Tx) (result, error) {
		q := l.queries.WithTx(tx)
		row, err := q.InsertAdjustment(ctx, gldb.InsertAdjustmentParams{
			ID: id, EntryID: entryID, IdempotencyKey: req.IdempotencyKey, RequestHash: hash,
			Reason: req.Reason, CreatedByKey: req.KeyID,
		})
		switch err := interpretError(err); {
		case errors.Is(err, errNoRow): // ON CONFLICT DO NOTHING: the key is taken
			owner, ownerHash, err := adjustmentByKey(ctx, q, req.IdempotencyKey)
			if err != nil {
				return result{}, err
			}
			a, err := gl.ReplayAdjustment(req.IdempotencyKey, hash, ownerHash, owner)
			return result{adjustment: a, replayed: true}, err
		case err != nil:
			return result{}, fmt.Errorf("claim adjustment key: %w", err)
		}
		rows, err := q.ListAccounts(ctx)
		if err != nil {
			return result{}, fmt.Errorf("read the chart of accounts: %w", interpretError(err))
		}
		chart := make(map[string]gl.Account, len(rows))
		for _, a := range rows {
			chart[a.Code] = accountFromRow(a)
		}
		now, err := q.StatementNow(ctx)
		if err != nil {
			return result{}, fmt.Errorf("read the time: %w", interpretError(err))
		}
		entry, err := req.Entry(id, entryID, chart, now)
		if err != nil {
			return result{}, err
		}
		postings, err := l.PostBatch(ctx, tx, []gl.Entry{entry})
		if err != nil {
			return result{}, fmt.Errorf("post adjustment %s: %w", id, err)
		}
		if !postings[0].Created { // its key is new, and only this adjustment takes it
			return result{}, fmt.Errorf("post adjustment %s: its entry key %s is taken", id, entry.TransferID)
		}
		entry.PostedAt = postings[0].Entry.PostedAt
		entry.AdjustmentID, entry.Reason = id, req.Reason
		if err := l.record(ctx, tx, ActionAdjust, gl.AdjustmentKey(id), adjustmentDetail(entry, req)); err != nil {
			return result{}, err
		}
		return result{adjustment: gl.Adjustment{ID: id, Reason: req.Reason, KeyID: req.KeyID, CreatedAt: row.CreatedAt, Entry: entry}}, nil
	})
	return r.adjustment, r.replayed, err
}

// adjustmentByKey reads the adjustment that holds key, with its entry's lines and the
// fingerprint of its request.
func adjustmentByKey(ctx context.Context, q *gldb.Queries, key string) (gl.Adjustment, []byte, error) {
	row, err := q.GetAdjustmentByKey(ctx, key)
	if err != nil {
		return gl.Adjustment{}, nil, fmt.Errorf("read adjustment by key: %w", interpretError(err))
	}
	entryRow, err := q.GetEntry(ctx, row.EntryID)
	if err != nil {
		return gl.Adjustment{}, nil, fmt.Errorf("read entry %s of adjustment %s: %w", row.EntryID, row.ID, interpretError(err))
	}
	entries, err := withLines(ctx, q, []gldb.JournalEntry{entryRow})
	if err != nil {
		return gl.Adjustment{}, nil, err
	}
	a := gl.Adjustment{ID: row.ID, Reason: row.Reason, KeyID: row.CreatedByKey, CreatedAt: row.CreatedAt, Entry: entries[0]}
	return a, row.RequestHash, nil
}

// adjustmentDetail is the audit record's detail of an adjustment: what it posted and why.
func adjustmentDetail(e gl.Entry, req gl.AdjustmentRequest) any {
	type line struct {
		Account   string       `json:"account"`
		Direction gl.Direction `json:"direction"`
		Amount    int64        `json:"amount"`
		WalletID  string       `json:"wallet_id,omitempty"`
	}
	lines := make([]line, len(e.Lines))
	for i, l := range e.Lines {
		lines[i] = line{Account: l.AccountCode, Direction: l.Direction, Amount: l.Amount, WalletID: l.WalletID}
	}
	return struct {
		EntryID        string `json:"entry_id"`
		IdempotencyKey string `json:"idempotency_key"`
		Reason         string `json:"reason"`
		Currency       string `json:"currency"`
		EffectiveAt    string `json:"effective_at"`
		Lines          []line `json:"lines"`
	}{e.ID.String(), req.IdempotencyKey, req.Reason, e.Currency, e.OccurredAt.UTC().Format("2006-01-02T15:04:05.999999Z07:00"), lines}
}
