package gl

import (
	"fmt"
	"maps"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
)

// TransferEntry decodes and checks a TransferCompleted event of either version (v1 upcast to
// kind unspecified) and builds its entry by the rule of rules in force for its type, kind and
// currency at the transfer's time. An event no rule covers, or whose transfer id takes a hold's
// movement key, can never be posted: contract.ErrMalformed.
func TransferEntry(env contract.Envelope, rules Rules) (Entry, error) {
	data, err := contract.DecodeTransferCompleted(env)
	if err != nil {
		return Entry{}, err
	}
	rule, err := ruleFor(rules, env.ID, env.Type, data.Kind, data.Currency, data.CreatedAt)
	if err != nil {
		return Entry{}, err
	}
	if err := checkNotHoldKey(env.ID, data.TransferID); err != nil {
		return Entry{}, err
	}
	entryID, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{
		ID:          entryID,
		EventID:     env.ID,
		TransferID:  data.TransferID,
		Currency:    data.Currency,
		Description: transferDescription(data),
		OccurredAt:  data.CreatedAt,
		Lines:       WalletLines(rule.lines(data.Amount), data.FromWalletID, data.ToWalletID),
		EventType:   env.Type,
		Kind:        data.Kind,
		Metadata:    data.Metadata,
	}, nil
}

// transferDescription is the entry's description: the transfer's wallets, and its reference
// when the payer gave one.
func transferDescription(data contract.TransferCompleted) string {
	d := fmt.Sprintf("transfer %s from wallet %s to wallet %s", data.TransferID, data.FromWalletID, data.ToWalletID)
	if data.Reference != "" {
		d += fmt.Sprintf(" (reference %q)", data.Reference)
	}
	return d
}

// PostedAs says how a movement's posting went for an event (CheckPosting).
type PostedAs int

// How an event's posting went (CheckPosting).
const (
	// PostedNew: the posting created the event's entry.
	PostedNew PostedAs = iota
	// PostedBefore: the same event was posted before; its entry stands.
	PostedBefore
)

// CheckPosting compares entry e, built from an event, with the posting that holds its
// movement. A movement is posted by one event: a movement posted before with another amount,
// currency or wallets (its description) is a conflict (a forged or corrupted event), and so is
// another event id for a movement already posted, even with the same figures. The wallet
// writes one event per movement and publishes it again under its own id only, so a second id
// is not a copy: acknowledging it would leave an inbox row processed with no entry of its own,
// which gl verify counts as a lost posting.
func CheckPosting(e Entry, posting Posting) (PostedAs, error) {
	stored := posting.Entry
	switch {
	case posting.Created:
		return PostedNew, nil
	case stored.Currency != e.Currency || !posting.Amount.Equal(SumOf(e.Debits())) || stored.Description != e.Description ||
		!maps.Equal(stored.Metadata, e.Metadata):
		return 0, contract.Conflict(fmt.Errorf("transfer %s was posted as %s %s (%s) by event %s; event %s says %d %s (%s)",
			e.TransferID, posting.Amount, stored.Currency, stored.Description, stored.EventID,
			e.EventID, e.Debits(), e.Currency, e.Description))
	case stored.EventID != e.EventID:
		return 0, contract.Conflict(fmt.Errorf("transfer %s was posted by event %s (entry %s); event %s is another event for the same movement",
			e.TransferID, stored.EventID, stored.ID, e.EventID))
	default:
		return PostedBefore, nil
	}
}

// Satisfies names what posting env lets a waiting event go on with (contract.WaitTransfer,
// contract.WaitHold): a transfer its reversals, a batch its batch reversals, a hold's
// placement its release. An event it
// cannot read satisfies nothing.
func Satisfies(env contract.Envelope) []string {
	switch env.Type {
	case contract.TypeTransferCompleted, contract.TypeTransferCompletedV2:
		if t, err := contract.DecodeTransferCompleted(env); err == nil {
			return []string{contract.WaitTransfer(t.TransferID)}
		}
	case contract.TypeTransferBatchCompleted:
		var b contract.TransferBatchCompleted
		if err := env.DecodeData(&b); err == nil {
			return []string{contract.WaitTransfer(b.BatchID)}
		}
	case contract.TypeHoldPlaced:
		var h contract.HoldPlaced
		if err := env.DecodeData(&h); err == nil {
			return []string{contract.WaitHold(h.HoldID)}
		}
	}
	return nil
}
