package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/internal/gldb"
)

// PostBatch inserts the new entries of a batch and their lines in two statements, inside the
// caller's transaction, and finds the entries already holding the others' transfers in a
// third: it returns, for each entry given, the posting that holds its transfer, and never
// stores a second entry for the same event or transfer. An entry whose event id was posted
// for another transfer has no posting to point to: gl.ErrEventTaken.
func (l *Ledger) PostBatch(ctx context.Context, tx pgx.Tx, entries []gl.Entry) ([]gl.Posting, error) {
	q := l.queries.WithTx(tx)
	params := gldb.InsertEntriesBatchParams{}
	for _, e := range entries {
		if !e.Balanced() {
			return nil, fmt.Errorf("post entry %s: %w", e.ID, gl.ErrUnbalanced)
		}
		params.Ids = append(params.Ids, e.ID)
		params.EventIds = append(params.EventIds, e.EventID)
		params.TransferIds = append(params.TransferIds, e.TransferID)
		params.Currencies = append(params.Currencies, e.Currency)
		params.Descriptions = append(params.Descriptions, e.Description)
		params.OccurredAts = append(params.OccurredAts, e.OccurredAt)
		params.ReversesEntryIds = append(params.ReversesEntryIds, e.ReversesEntryID)
		params.HoldIds = append(params.HoldIds, e.HoldID)
		eventType, kind := ruleKey(e)
		params.EntryEventTypes = append(params.EntryEventTypes, eventType)
		params.Kinds = append(params.Kinds, kind)
		params.Metadata = append(params.Metadata, string(e.Metadata.JSON()))
	}
	rows, err := q.InsertEntriesBatch(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("insert %d entries: %w", len(entries), interpretError(err))
	}
	created := make(map[string]gldb.JournalEntry, len(rows)) // by entry id
	for _, row := range rows {
		created[row.ID.String()] = row
	}
	if err := l.insertLines(ctx, q, entries, created); err != nil {
		return nil, err
	}
	held, err := l.heldBy(ctx, q, entries, created)
	if err != nil {
		return nil, err
	}
	postings := make([]gl.Posting, len(entries))
	for i, e := range entries {
		if row, ok := created[e.ID.String()]; ok {
			postings[i] = gl.Posting{Entry: entryFromRow(row), Amount: gl.SumOf(e.Debits()), Created: true}
			continue
		}
		row, ok := held[e.TransferID]
		if !ok {
			return nil, fmt.Errorf("post transfer %s with event %s: %w", e.TransferID, e.EventID, gl.ErrEventTaken)
		}
		amount, err := sumFrom(row.Debits)
		if err != nil {
			return nil, fmt.Errorf("posting of transfer %s: %w", e.TransferID, err)
		}
		postings[i] = gl.Posting{Entry: entryFromRow(gldb.JournalEntry{
			ID: row.ID, EventID: row.EventID, TransferID: row.TransferID, Currency: row.Currency,
			Description: row.Description, OccurredAt: row.OccurredAt, PostedAt: row.PostedAt,
			ReversesEntryID: row.ReversesEntryID, HoldID: row.HoldID, EventType: row.EventType, Kind: row.Kind,
			Metadata: row.Metadata,
		}), Amount: amount}
	}
	return postings, nil
}

func (l *Ledger) insertLines(ctx context.Context, q *gldb.Queries, entries []gl.Entry, created map[string]gldb.JournalEntry) error {
	var p gldb.InsertLinesBatchParams
	for _, e := range entries {
		row, ok := created[e.ID.String()]
		if !ok {
			continue
		}
		for _, line := range e.Lines {
			p.EntryIds = append(p.EntryIds, row.ID)
			p.AccountCodes = append(p.AccountCodes, line.AccountCode)
			p.Directions = append(p.Directions, string(line.Direction))
			p.Amounts = append(p.Amounts, line.Amount)
			p.Currencies = append(p.Currencies, e.LineCurrency(line))
			p.PostedAts = append(p.PostedAts, row.PostedAt)
			p.WalletIds = append(p.WalletIds, line.WalletID)
			p.LegIds = append(p.LegIds, line.TransferID)
			p.LegKinds = append(p.LegKinds, line.LegKind)
			p.ReversesLineIds = append(p.ReversesLineIds, line.ReversesLineID)
		}
	}
	if len(p.EntryIds) == 0 {
		return nil
	}
	if err := q.InsertLinesBatch(ctx, p); err != nil {
		return fmt.Errorf("insert %d lines: %w", len(p.EntryIds), interpretError(err))
	}
	return nil
}

// heldBy finds, by transfer id, the stored entries of the transfers whose entry was not created.
func (l *Ledger) heldBy(ctx context.Context, q *gldb.Queries, entries []gl.Entry, created map[string]gldb.JournalEntry) (map[string]gldb.GetEntriesByTransfersRow, error) {
	var missing []string
	for _, e := range entries {
		if _, ok := created[e.ID.String()]; !ok {
			missing = append(missing, e.TransferID)
		}
	}
	held := map[string]gldb.GetEntriesByTransfersRow{}
	if len(missing) == 0 {
		return held, nil
	}
	rows, err := q.GetEntriesByTransfers(ctx, missing)
	if err != nil {
		return nil, fmt.Errorf("find entries of %d transfers: %w", len(missing), interpretError(err))
	}
	for _, row := range rows {
		held[row.TransferID] = row
	}
	return held, nil
}

// PostedEntries returns, by transfer id, the entries posted for these transfers, with their
// lines, as tx sees them: a reversal's entry is built from its original's.
func (l *Ledger) PostedEntries(ctx context.Context, tx pgx.Tx, transferIDs []string) (map[string]gl.Entry, error) {
	q := l.queries.WithTx(tx)
	rows, err := q.GetEntriesByTransfers(ctx, transferIDs)
	if err != nil {
		return nil, fmt.Errorf("find entries of %d transfers: %w", len(transferIDs), interpretError(err))
	}
	plain := make([]gldb.JournalEntry, len(rows))
	for i, row := range rows {
		plain[i] = gldb.JournalEntry{
			ID: row.ID, EventID: row.EventID, TransferID: row.TransferID, Currency: row.Currency,
			Description: row.Description, OccurredAt: row.OccurredAt, PostedAt: row.PostedAt,
			ReversesEntryID: row.ReversesEntryID, HoldID: row.HoldID, EventType: row.EventType, Kind: row.Kind,
		}
	}
	entries, err := withLines(ctx, q, plain)
	if err != nil {
		return nil, err
	}
	out := make(map[string]gl.Entry, len(entries))
	for _, e := range entries {
		out[e.TransferID] = e
	}
	return out, nil
}

// LegEntries returns, by leg id, the key of the batch entry holding each of these legs (a
// batch's leg or a batch reversal's leg reversal), as tx sees them; a leg of none is absent.
func (l *Ledger) LegEntries(ctx context.Context, tx pgx.Tx, legIDs []string) (map[string]string, error) {
	rows, err := l.queries.WithTx(tx).GetEntryKeysByLegs(ctx, legIDs)
	if err != nil {
		return nil, fmt.Errorf("find the batches of %d legs: %w", len(legIDs), interpretError(err))
	}
	out := make(map[string]string, len(rows))
	for _, row := range rows {
		out[row.LegID] = row.EntryKey
	}
	return out, nil
}

// ruleKey is the event type and kind an entry is stored with: an entry built without them
// (by hand, in tests and benchmarks) is today's TransferCompleted.v1 of kind unspecified.
func ruleKey(e gl.Entry) (eventType, kind string) {
	eventType, kind = e.EventType, e.Kind
	if eventType == "" {
		eventType = contract.TypeTransferCompleted
	}
	if kind == "" {
		kind = contract.KindUnspecified
	}
	return eventType, kind
}
