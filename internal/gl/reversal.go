package gl

import (
	"fmt"
	"math/big"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
)

// A reversal's entry swaps its original's lines (debit <-> credit) for the reversed amount and
// names the original (ReversesEntryID). Its transfer id is the reversal's own id: a reversal
// is a movement of its own, posted once like a transfer, under the same unique constraints.

// DecodeReversal decodes and checks a TransferReversed event; a reversal id in the holds' key
// space is malformed.
func DecodeReversal(env contract.Envelope) (contract.TransferReversed, error) {
	var data contract.TransferReversed
	if err := env.DecodeData(&data); err != nil {
		return data, err
	}
	if err := data.Validate(); err != nil {
		return data, fmt.Errorf("validate event %s: %w", env.ID, err)
	}
	if err := checkNotHoldKey(env.ID, data.ReversalID); err != nil {
		return data, err
	}
	return data, nil
}

// NoOriginal is the error of a reversal whose original transfer has no entry yet: it waits for
// it (contract.ErrNotYet), parked in the inbox until the original posts, without counting
// against the event.
func NoOriginal(eventID string, data contract.TransferReversed) error {
	return contract.NotYet(contract.WaitTransfer(data.TransferID), fmt.Errorf("reversal %s (event %s): transfer %s has no entry yet", data.ReversalID, eventID, data.TransferID))
}

// ReversalEntry is the entry of event eventID, data's reversal of orig (the original's posted
// entry, with lines): each of orig's lines on the other side, for
// the reversed share of its amount. A reversal that does not fit its original (another
// currency, more than its amount, an original that is itself a reversal, a share that does not
// divide the lines exactly) contradicts the ledger: a conflict, never posted.
func ReversalEntry(eventID string, data contract.TransferReversed, orig Entry) (Entry, error) {
	total := orig.Debits()
	switch {
	case orig.HoldID != "":
		return Entry{}, contract.Conflict(fmt.Errorf("reversal %s: %s is a hold's movement (entry %s), not a transfer", data.ReversalID, data.TransferID, orig.ID))
	case orig.EventType == contract.TypeTransferBatchCompleted:
		return Entry{}, contract.Conflict(fmt.Errorf("reversal %s: %s is a batch (entry %s), reversed only by a batch reversal", data.ReversalID, data.TransferID, orig.ID))
	case orig.ReversesEntryID != uuid.Nil:
		return Entry{}, contract.Conflict(fmt.Errorf("reversal %s: transfer %s was posted as a reversal (entry %s)", data.ReversalID, data.TransferID, orig.ID))
	case orig.Currency != data.Currency:
		return Entry{}, contract.Conflict(fmt.Errorf("reversal %s is in %s, transfer %s was posted in %s", data.ReversalID, data.Currency, data.TransferID, orig.Currency))
	case data.Amount > total:
		return Entry{}, contract.Conflict(fmt.Errorf("reversal %s of %d exceeds transfer %s's %d", data.ReversalID, data.Amount, data.TransferID, total))
	}
	lines := make([]Line, 0, len(orig.Lines))
	for _, l := range orig.Lines {
		amount := l.Amount
		if data.Amount != total { // the line's share: l.Amount * reversed / total, exactly
			num := new(big.Int).Mul(big.NewInt(l.Amount), big.NewInt(data.Amount))
			q, r := new(big.Int).QuoRem(num, big.NewInt(total), new(big.Int))
			if r.Sign() != 0 {
				return Entry{}, contract.Conflict(fmt.Errorf("reversal %s: %d of %d does not divide line %s %d of entry %s exactly",
					data.ReversalID, data.Amount, total, l.Direction, l.Amount, orig.ID))
			}
			amount = q.Int64()
		}
		lines = append(lines, Line{AccountCode: l.AccountCode, Direction: opposite(l.Direction), Amount: amount, WalletID: l.WalletID})
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{
		ID:              id,
		EventID:         eventID,
		TransferID:      data.ReversalID,
		Currency:        data.Currency,
		Description:     fmt.Sprintf("reversal %s of transfer %s from wallet %s to wallet %s", data.ReversalID, data.TransferID, data.FromWalletID, data.ToWalletID),
		OccurredAt:      data.CreatedAt,
		Lines:           lines,
		ReversesEntryID: orig.ID,
		EventType:       contract.TypeTransferReversed,
		Kind:            orig.Kind,
		Metadata:        data.Metadata,
	}, nil
}

func opposite(d Direction) Direction {
	if d == Debit {
		return Credit
	}
	return Debit
}
