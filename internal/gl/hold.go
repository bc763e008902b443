package gl

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
)

// Holds. The GL posts a hold's reservation and its release; the captured amount
// moves as an ordinary transfer, with its own TransferCompleted event and entry. A hold has at
// most two entries, keyed in transfer_id by movement keys no transfer uuid can take
// (HoldPlacedKey, HoldReleasedKey) and carrying HoldID: UNIQUE (transfer_id) then posts each
// once, and a capture and a void of the same hold cannot both release it.

// HoldRules names the accounts of a hold's two postings: Place moves the held amount out of the
// wallets' balances into the funds on hold, Release moves the whole held amount back. Per
// currency, the hold account's balance is then the total of the open holds. A value of its
// own, like PostingRule, so that the rules can later come from a rule table.
type HoldRules struct {
	Place   PostingRule
	Release PostingRule
}

// DefaultHoldRules: debit wallet balances (2010) and credit funds on hold (2020) to place;
// the other way round to release.
var DefaultHoldRules = HoldRules{
	Place:   PostingRule{DebitAccount: "2010", CreditAccount: "2020"},
	Release: PostingRule{DebitAccount: "2020", CreditAccount: "2010"},
}

// Check verifies at start-up that both rules' accounts exist and that the release undoes the
// placement (the same two accounts, swapped): otherwise the hold account would not net to the
// open holds.
func (r HoldRules) Check(ctx context.Context, accounts Accounts) error {
	if err := r.Place.Check(ctx, accounts); err != nil {
		return fmt.Errorf("hold placement: %w", err)
	}
	if err := r.Release.Check(ctx, accounts); err != nil {
		return fmt.Errorf("hold release: %w", err)
	}
	if r.Release.DebitAccount != r.Place.CreditAccount || r.Release.CreditAccount != r.Place.DebitAccount {
		return fmt.Errorf("check hold rules: the release (debit %s, credit %s) must swap the placement (debit %s, credit %s)",
			r.Release.DebitAccount, r.Release.CreditAccount, r.Place.DebitAccount, r.Place.CreditAccount)
	}
	return nil
}

// HoldAccount is the account whose balance is the open holds' total (the placement's credit).
func (r HoldRules) HoldAccount() string { return r.Place.CreditAccount }

// The movement keys of a hold's entries, in journal_entries.transfer_id.
const (
	holdKeyPrefix     = "hold:"
	holdPlacedSuffix  = ":placed"
	holdReleaseSuffix = ":released"
)

// HoldPlacedKey is the transfer_id of hold id's placement entry.
func HoldPlacedKey(id string) string { return holdKeyPrefix + id + holdPlacedSuffix }

// HoldReleasedKey is the transfer_id of hold id's release entry (a capture's or a void's).
func HoldReleasedKey(id string) string { return holdKeyPrefix + id + holdReleaseSuffix }

// holdKey matches a hold entry's movement key (HoldPlacedKey, HoldReleasedKey).
var holdKey = regexp.MustCompile(`^hold:[A-Za-z0-9._-]{1,64}:(placed|released)$`)

// IsHoldKey reports whether transferID is a hold entry's movement key.
func IsHoldKey(transferID string) bool { return holdKey.MatchString(transferID) }

// IsHoldEvent reports whether the consumer's event of type t is a hold's (HoldPlaced,
// HoldCaptured, HoldVoided).
func IsHoldEvent(t string) bool {
	return t == contract.TypeHoldPlaced || t == contract.TypeHoldCaptured || t == contract.TypeHoldVoided
}

// HoldEventTypes are the hold events the GL consumes.
var HoldEventTypes = []string{contract.TypeHoldPlaced, contract.TypeHoldCaptured, contract.TypeHoldVoided}

// Release is what a capture or a void says about the placement it releases (DecodeRelease).
type Release struct {
	EventID  string
	HoldID   string
	WalletID string
	Amount   int64
	entry    Entry // without id and lines until ReleaseEntry
}

// PlacedKey is the movement key of the placement the release releases (HoldPlacedKey).
func (r Release) PlacedKey() string { return HoldPlacedKey(r.HoldID) }

// PlacementEntry decodes and checks a HoldPlaced event and builds its entry by holds.Place.
func PlacementEntry(env contract.Envelope, holds HoldRules) (Entry, error) {
	var data contract.HoldPlaced
	if err := decodeValid(env, &data); err != nil {
		return Entry{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	return Entry{
		ID:          id,
		EventID:     env.ID,
		TransferID:  HoldPlacedKey(data.HoldID),
		HoldID:      data.HoldID,
		EventType:   env.Type,
		Kind:        KindHold,
		Currency:    data.Currency,
		Description: placementDescription(data.HoldID, data.WalletID),
		OccurredAt:  data.CreatedAt,
		Lines:       WalletLines(holds.Place.lines(data.Amount), data.WalletID, data.WalletID),
		Metadata:    data.Metadata,
	}, nil
}

// placementDescription is the placement entry's description; a release compares it to find a
// wallet other than the hold's.
func placementDescription(holdID, walletID string) string {
	return fmt.Sprintf("hold %s placed on wallet %s", holdID, walletID)
}

// DecodeRelease decodes and checks a HoldCaptured or HoldVoided event. Its entry's description
// names how the hold ended, so that a capture and a void of the same hold conflict.
func DecodeRelease(env contract.Envelope) (Release, error) {
	rel := Release{EventID: env.ID}
	var (
		currency string
		how      string
	)
	switch env.Type {
	case contract.TypeHoldCaptured:
		var data contract.HoldCaptured
		if err := decodeValid(env, &data); err != nil {
			return rel, err
		}
		rel.HoldID, rel.WalletID, rel.Amount, currency = data.HoldID, data.WalletID, data.Amount, data.Currency
		rel.entry.OccurredAt = data.CreatedAt
		how = fmt.Sprintf("captured %d as transfer %s to wallet %s", data.CapturedAmount, data.TransferID, data.ToWalletID)
	case contract.TypeHoldVoided:
		var data contract.HoldVoided
		if err := decodeValid(env, &data); err != nil {
			return rel, err
		}
		rel.HoldID, rel.WalletID, rel.Amount, currency = data.HoldID, data.WalletID, data.Amount, data.Currency
		rel.entry.OccurredAt = data.CreatedAt
		how = "voided (" + data.Reason + ")"
	default:
		return rel, contract.Permanent(fmt.Errorf("post event %s: type %q is not a hold's release", env.ID, env.Type))
	}
	rel.entry.EventID = env.ID
	rel.entry.TransferID = HoldReleasedKey(rel.HoldID)
	rel.entry.HoldID = rel.HoldID
	rel.entry.EventType, rel.entry.Kind = env.Type, KindHold
	rel.entry.Currency = currency
	rel.entry.Description = fmt.Sprintf("release of hold %s on wallet %s: %s", rel.HoldID, rel.WalletID, how)
	return rel, nil
}

// decodeValid decodes env's data into v and checks it (Validate).
func decodeValid[T interface{ Validate() error }](env contract.Envelope, v *T) error {
	if err := env.DecodeData(v); err != nil {
		return err
	}
	if err := (*v).Validate(); err != nil {
		return fmt.Errorf("validate event %s: %w", env.ID, err)
	}
	return nil
}

// NoPlacement is the error of a release whose hold has no placement posted yet: it waits for
// the placement (contract.ErrNotYet), as a reversal waits for its transfer.
func NoPlacement(rel Release) error {
	return contract.NotYet(contract.WaitHold(rel.HoldID), fmt.Errorf("release of hold %s (event %s): the hold has no placement yet", rel.HoldID, rel.EventID))
}

// ReleaseEntry checks rel against placed, its hold's posted placement entry (with lines), and
// builds the release's entry by holds.Release for the whole held amount. A release that
// contradicts its placement is a conflict.
func ReleaseEntry(rel Release, placed Entry, holds HoldRules) (Entry, error) {
	if err := checkRelease(rel, placed); err != nil {
		return Entry{}, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("new entry id: %w", err)
	}
	entry := rel.entry
	entry.ID = id
	entry.Lines = WalletLines(holds.Release.lines(rel.Amount), rel.WalletID, rel.WalletID)
	return entry, nil
}

// checkRelease refuses, as a conflict, a release whose hold was placed on another wallet, in
// another currency or for another amount.
func checkRelease(rel Release, placed Entry) error {
	var why []string
	if placed.HoldID != rel.HoldID {
		why = append(why, fmt.Sprintf("entry %s is not the hold's", placed.ID))
	}
	if placed.Description != placementDescription(rel.HoldID, rel.WalletID) {
		why = append(why, fmt.Sprintf("the hold was placed as %q, not on wallet %s", placed.Description, rel.WalletID))
	}
	if placed.Currency != rel.entry.Currency {
		why = append(why, fmt.Sprintf("the hold is in %s, not %s", placed.Currency, rel.entry.Currency))
	}
	if placed.Debits() != rel.Amount {
		why = append(why, fmt.Sprintf("the hold is of %d, not %d", placed.Debits(), rel.Amount))
	}
	if len(why) > 0 {
		return contract.Conflict(fmt.Errorf("release of hold %s (event %s) contradicts its placement (entry %s): %s",
			rel.HoldID, rel.EventID, placed.ID, strings.Join(why, "; ")))
	}
	return nil
}

// errHoldKey refuses a transfer or reversal whose id takes a hold's movement key.
var errHoldKey = errors.New("transfer id takes a hold's movement key (hold:…)")

// checkNotHoldKey refuses, permanently, a transfer or reversal id in the holds' key space.
func checkNotHoldKey(eventID, transferID string) error {
	if strings.HasPrefix(transferID, holdKeyPrefix) {
		return contract.Permanent(fmt.Errorf("event %s: %q: %w", eventID, transferID, errHoldKey))
	}
	return nil
}
