package gl

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"walletgl/internal/money"
)

// Hold statuses as the wallet publishes them (its holds table, the view reconcile_holds_v1,
// GET /v1/holds).
const (
	HoldPending  = "pending"
	HoldCaptured = "captured"
	HoldVoided   = "voided"
)

// SourceHold is a hold as the wallet recorded it: the GL must hold its placement, and its
// release once it is captured or voided.
type SourceHold struct {
	ID       string
	WalletID string
	Amount   int64
	Currency string
	Status   string // HoldPending, HoldCaptured or HoldVoided
}

// Finished reports whether the hold was captured or voided: its release is due.
func (h SourceHold) Finished() bool { return h.Status == HoldCaptured || h.Status == HoldVoided }

// HoldSource is the wallet's holds for a reconciliation, where the TransferSource publishes
// them too (walletapi: GET /v1/holds; postgres.WalletView: the view reconcile_holds_v1).
// A TransferSource without it leaves the holds to their totals (Reconciliation.Holds).
type HoldSource interface {
	// Holds returns every hold the wallet holds; ErrNoHolds when the wallet does not publish
	// them (a wallet before reconcile_holds_v1 or GET /v1/holds).
	Holds(ctx context.Context) ([]SourceHold, error)
	// Hold returns one hold; found is false when the wallet has none with this id.
	Hold(ctx context.Context, id string) (h SourceHold, found bool, err error)
}

// ErrNoHolds is a HoldSource's answer when the wallet does not publish its holds: the
// reconciliation then totals the GL's holds only, as before, and says so (HoldsCompared).
var ErrNoHolds = errors.New("the wallet does not publish its holds")

// readHolds reads the wallet's holds when src publishes them; compared is false otherwise.
func readHolds(ctx context.Context, src TransferSource) (holds []SourceHold, compared bool, err error) {
	hs, ok := src.(HoldSource)
	if !ok {
		return nil, false, nil
	}
	holds, err = hs.Holds(ctx)
	if errors.Is(err, ErrNoHolds) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the wallet's holds: %w", err)
	}
	return holds, true, nil
}

// rereadHolds brings holds, a listing read before entries, up to the entries: a hold entry
// whose hold is not in the listing (placed after it), and a listed pending hold whose release
// the GL already holds (finished after it), is read again on its own before it counts as a
// difference. A hold finished after the entries were read shows as a missing release, as a
// transfer not yet posted shows as missing.
func rereadHolds(ctx context.Context, src TransferSource, holds []SourceHold, entries []Entry) ([]SourceHold, error) {
	hs, ok := src.(HoldSource)
	if !ok {
		return holds, nil
	}
	holds = append([]SourceHold(nil), holds...)
	index := make(map[string]int, len(holds))
	for i, h := range holds {
		index[h.ID] = i
	}
	asked := map[string]bool{}
	for _, e := range entries {
		if e.HoldID == "" || asked[e.HoldID] {
			continue
		}
		i, listed := index[e.HoldID]
		stale := listed && !holds[i].Finished() && e.TransferID == HoldReleasedKey(e.HoldID)
		if listed && !stale {
			continue
		}
		asked[e.HoldID] = true
		h, found, err := hs.Hold(ctx, e.HoldID)
		if err != nil {
			return nil, fmt.Errorf("read the wallet's hold %s: %w", e.HoldID, err)
		}
		switch {
		case found && listed:
			holds[i] = h
		case found:
			index[h.ID] = len(holds)
			holds = append(holds, h)
		}
	}
	return holds, nil
}

// ReconcileHolds compares the wallet's holds with the GL's hold entries (rules: the placement's
// and the release's accounts): a pending hold must have its placement and no release, a
// captured or voided one both; each with the hold's amount and currency on the rule's
// accounts. A hold entry of a hold the wallet does not have is extra. Its differences are of
// the transfers' kinds (DiffMissing, DiffExtra, DiffDuplicate, DiffMismatch) on a hold's
// movement: Difference.TransferID is the movement's key (HoldPlacedKey or HoldReleasedKey, as
// in the entries) and Difference.HoldID the hold.
func ReconcileHolds(rules HoldRules, holds []SourceHold, entries []Entry) []Difference {
	var diffs []Difference
	add := func(kind, key, holdID string, posted []Entry, format string, args ...any) {
		diffs = append(diffs, Difference{Kind: kind, TransferID: key, HoldID: holdID, EntryIDs: entryIDs(posted), Detail: fmt.Sprintf(format, args...)})
	}
	byKey := map[string][]Entry{}
	for _, e := range entries {
		if e.HoldID != "" {
			byKey[e.TransferID] = append(byKey[e.TransferID], e)
		}
	}
	known := make(map[string]bool, 2*len(holds))
	for _, h := range holds {
		placed, released := HoldPlacedKey(h.ID), HoldReleasedKey(h.ID)
		known[placed], known[released] = true, true
		check := func(key, what string, rule PostingRule) {
			posted := byKey[key]
			switch {
			case len(posted) == 0:
				add(DiffMissing, key, h.ID, nil, "%s hold of %s %s on wallet %s has no GL %s", h.Status, money.Format(h.Amount, h.Currency), h.Currency, h.WalletID, what)
			case len(posted) > 1:
				add(DiffDuplicate, key, h.ID, posted, "hold %s posted %d times", what, len(posted))
			default:
				if why := holdMismatch(rule, h, posted[0]); why != "" {
					add(DiffMismatch, key, h.ID, posted, "hold %s: %s", what, why)
				}
			}
		}
		check(placed, "placement", rules.Place)
		switch {
		case h.Finished():
			check(released, "release", rules.Release)
		case len(byKey[released]) > 0:
			add(DiffExtra, released, h.ID, byKey[released], "GL release of a hold the wallet has %s", h.Status)
		}
	}
	for key, posted := range byKey {
		if !known[key] {
			add(DiffExtra, key, posted[0].HoldID, posted, "GL entry for a hold the wallet does not have")
		}
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].TransferID < diffs[j].TransferID })
	return diffs
}

// holdMismatch explains how e differs from the hold's movement by rule.
func holdMismatch(rule PostingRule, h SourceHold, e Entry) string {
	if e.Currency != h.Currency {
		return fmt.Sprintf("currency %s in the wallet, %s in the GL", h.Currency, e.Currency)
	}
	return linesMismatch(e.Lines, h.Amount, map[Direction]string{Debit: rule.DebitAccount, Credit: rule.CreditAccount}, "the hold rule")
}
