package gl

import (
	"fmt"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
)

// A batch (TransferBatchCompleted.v1) is posted as ONE entry keyed by the batch's id: each
// leg's lines as the rule in force for a TransferCompleted.v2 of the leg's kind and currency
// at the batch's time makes them, each line tagged with its leg's transfer id. A batch
// reversal (TransferBatchReversed.v1) is one entry keyed by its own id reversing the batch's
// entry: the chosen legs' lines on the other side, each tagged with its leg reversal's id and
// naming the line it reverses. Legs may be in different currencies: the entry is then
// MultiCurrency and balances in each.

// KindBatch is the kind of a batch's entry and of its reversals' entries: the rule of each
// leg is its own kind's.
const KindBatch = "batch"

// IsBatch reports whether e is a batch's entry or a batch reversal's.
func (e Entry) IsBatch() bool {
	return e.EventType == contract.TypeTransferBatchCompleted || e.EventType == contract.TypeTransferBatchReversed
}

// BatchEntry decodes and checks a TransferBatchCompleted event and builds its entry. An event
// that fails its contract, a leg no rule covers, or an id in the holds' key space can never be
// posted: contract.ErrMalformed.
func BatchEntry(env contract.Envelope, rules Rules) (Entry, error) {
	var data contract.TransferBatchCompleted
	if err := decodeValid(env, &data); err != nil {
		return Entry{}, err
	}
	if err := checkNotHoldKey(env.ID, data.BatchID); err != nil {
		return Entry{}, err
	}
	var lines []Line
	for _, leg := range data.Transfers {
		if err := checkNotHoldKey(env.ID, leg.TransferID); err != nil {
			return Entry{}, err
		}
		rule, err := ruleFor(rules, env.ID, contract.TypeTransferCompletedV2, leg.Kind, leg.Currency, data.CreatedAt)
		if err != nil {
			return Entry{}, err
		}
		for _, l := range WalletLines(rule.lines(leg.Amount), leg.FromWalletID, leg.ToWalletID) {
			l.Currency, l.TransferID, l.LegKind = leg.Currency, leg.TransferID, leg.Kind
			lines = append(lines, l)
		}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{
		ID:          id,
		EventID:     env.ID,
		TransferID:  data.BatchID,
		Currency:    currencyOf(lines),
		Description: fmt.Sprintf("batch %s of %d transfers", data.BatchID, len(data.Transfers)),
		OccurredAt:  data.CreatedAt,
		Lines:       lines,
		EventType:   env.Type,
		Kind:        KindBatch,
		Metadata:    data.Metadata,
	}, nil
}

// currencyOf is the currency of an entry of lines: theirs when they share one, else
// MultiCurrency.
func currencyOf(lines []Line) string {
	currency := ""
	for _, l := range lines {
		switch {
		case currency == "":
			currency = l.Currency
		case currency != l.Currency:
			return MultiCurrency
		}
	}
	return currency
}

// DecodeBatchReversal decodes and checks a TransferBatchReversed event; an id in the holds'
// key space is malformed.
func DecodeBatchReversal(env contract.Envelope) (contract.TransferBatchReversed, error) {
	var data contract.TransferBatchReversed
	if err := decodeValid(env, &data); err != nil {
		return data, err
	}
	if err := checkNotHoldKey(env.ID, data.BatchReversalID); err != nil {
		return data, err
	}
	for _, r := range data.Reversals {
		if err := checkNotHoldKey(env.ID, r.ReversalID); err != nil {
			return data, err
		}
	}
	return data, nil
}

// NoBatch is the error of a batch reversal whose batch has no entry yet: it waits for it
// (contract.ErrNotYet) as NoOriginal does.
func NoBatch(eventID string, data contract.TransferBatchReversed) error {
	return contract.NotYet(contract.WaitTransfer(data.BatchID), fmt.Errorf("batch reversal %s (event %s): batch %s has no entry yet", data.BatchReversalID, eventID, data.BatchID))
}

// BatchReversalEntry is the entry of event eventID, data's reversal of batch entry orig (read
// with its lines): each chosen leg's lines on the other side, in full. taken holds the ids of
// lines reversed by batch reversals posted in the same transaction but not yet read with orig;
// the lines this entry reverses are added to it. An entry that is not a batch's, a leg not in
// the batch, a leg reversed before, or a leg reversal that does not match its leg's amount and
// currency contradicts the ledger: a conflict, never posted.
func BatchReversalEntry(eventID string, data contract.TransferBatchReversed, orig Entry, taken map[int64]bool) (Entry, error) {
	if orig.EventType != contract.TypeTransferBatchCompleted {
		return Entry{}, contract.Conflict(fmt.Errorf("batch reversal %s: %s was not posted as a batch (entry %s)", data.BatchReversalID, data.BatchID, orig.ID))
	}
	legs := map[string][]Line{}
	for _, l := range orig.Lines {
		legs[l.TransferID] = append(legs[l.TransferID], l)
	}
	var lines []Line
	for _, r := range data.Reversals {
		leg := legs[r.TransferID]
		if r.TransferID == "" || len(leg) == 0 {
			return Entry{}, contract.Conflict(fmt.Errorf("batch reversal %s: transfer %s is not a leg of batch %s", data.BatchReversalID, r.TransferID, data.BatchID))
		}
		var debits int64
		for _, l := range leg {
			if l.Reversed || taken[l.ID] {
				return Entry{}, contract.Conflict(fmt.Errorf("batch reversal %s: leg %s of batch %s was reversed before", data.BatchReversalID, r.TransferID, data.BatchID))
			}
			if c := orig.LineCurrency(l); c != r.Currency {
				return Entry{}, contract.Conflict(fmt.Errorf("batch reversal %s: leg %s is in %s, its reversal %s in %s", data.BatchReversalID, r.TransferID, c, r.ReversalID, r.Currency))
			}
			if l.Direction == Debit {
				debits += l.Amount
			}
		}
		if debits != r.Amount {
			return Entry{}, contract.Conflict(fmt.Errorf("batch reversal %s: leg %s was posted as %d, its reversal %s says %d", data.BatchReversalID, r.TransferID, debits, r.ReversalID, r.Amount))
		}
		for _, l := range leg {
			lines = append(lines, Line{
				AccountCode: l.AccountCode, Direction: opposite(l.Direction), Amount: l.Amount, WalletID: l.WalletID,
				Currency: orig.LineCurrency(l), TransferID: r.ReversalID, LegKind: l.LegKind, ReversesLineID: l.ID,
			})
		}
	}
	for _, l := range lines {
		taken[l.ReversesLineID] = true
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{
		ID:              id,
		EventID:         eventID,
		TransferID:      data.BatchReversalID,
		Currency:        currencyOf(lines),
		Description:     fmt.Sprintf("batch reversal %s of %d legs of batch %s", data.BatchReversalID, len(data.Reversals), data.BatchID),
		OccurredAt:      data.CreatedAt,
		Lines:           lines,
		ReversesEntryID: orig.ID,
		EventType:       contract.TypeTransferBatchReversed,
		Kind:            KindBatch,
		Metadata:        data.Metadata,
	}, nil
}

// LegPosted is the error of a TransferReversed naming a batch's leg: a leg is reversed only
// with its batch (TransferBatchReversed), so the event contradicts the ledger.
func LegPosted(data contract.TransferReversed, batchKey string) error {
	return contract.Conflict(fmt.Errorf("reversal %s: transfer %s is a leg of batch %s, reversed only by a batch reversal", data.ReversalID, data.TransferID, batchKey))
}
