package gl

import (
	"context"
	"fmt"
	"math/big"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"walletgl/internal/events/contract"
)

// A reversal's entry swaps its original's lines (debit <-> credit) for the reversed amount and
// names the original (ReversesEntryID). Its transfer id is the reversal's own id: a reversal
// is a movement of its own, posted once like a transfer, under the same unique constraints.

// decodeReversal decodes and checks a TransferReversed event.
func decodeReversal(env contract.Envelope) (contract.TransferReversed, error) {
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

// reversalEntries builds the entries of the reversals at indexes idx from their originals'
// entries, as tx sees them (the batch's own transfers posted already). A reversal whose
// original has no entry yet waits for it: contract.NotYet has the consumer park it in the inbox
// until the original posts, without counting it against the event.
func (p *TransferPoster) reversalEntries(ctx context.Context, tx pgx.Tx, idx []int, reversed map[int]contract.TransferReversed,
	envs []contract.Envelope, entries []Entry) error {
	ids := make([]string, 0, len(idx))
	for _, i := range idx {
		ids = append(ids, reversed[i].TransferID)
	}
	originals, err := p.ledger.PostedEntries(ctx, tx, ids)
	if err != nil {
		return fmt.Errorf("find the entries of %d reversed transfers: %w", len(ids), err)
	}
	for _, i := range idx {
		data := reversed[i]
		orig, ok := originals[data.TransferID]
		if !ok {
			return contract.NotYet(contract.WaitTransfer(data.TransferID), fmt.Errorf("reversal %s (event %s): transfer %s has no entry yet", data.ReversalID, envs[i].ID, data.TransferID))
		}
		entry, err := reversalEntry(envs[i].ID, data, orig)
		if err != nil {
			return err
		}
		entries[i] = entry
	}
	return nil
}

// reversalEntry is the entry of a reversal of orig: each of orig's lines on the other side, for
// the reversed share of its amount. A reversal that does not fit its original (another
// currency, more than its amount, an original that is itself a reversal, a share that does not
// divide the lines exactly) contradicts the ledger: a conflict, never posted.
func reversalEntry(eventID string, data contract.TransferReversed, orig Entry) (Entry, error) {
	total := orig.Debits()
	switch {
	case orig.HoldID != "":
		return Entry{}, contract.Conflict(fmt.Errorf("reversal %s: %s is a hold's movement (entry %s), not a transfer", data.ReversalID, data.TransferID, orig.ID))
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
		lines = append(lines, Line{AccountCode: l.AccountCode, Direction: opposite(l.Direction), Amount: amount})
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
		EventType:       orig.EventType,
		Kind:            orig.Kind,
	}, nil
}

func opposite(d Direction) Direction {
	if d == Debit {
		return Credit
	}
	return Debit
}
