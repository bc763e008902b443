package gl

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"walletgl/internal/events/contract"
	"walletgl/internal/money"
)

// SourceTransfer is a transfer as the wallet recorded it: what the GL must hold an entry for.
type SourceTransfer struct {
	ID       string
	Amount   int64
	Currency string
	// ReversesTransferID is set on a reversal: the transfer it reverses, whose entry its own
	// must reverse.
	ReversesTransferID string
	// Kind is the transfer's kind as the wallet sees it (deposit, transfer, withdrawal), where
	// its source tells (the view reconcile_transfers_v3); "" otherwise, and on a reversal.
	Kind string
	// EntryKey is the GL entry key that posts the transfer, where its source tells (the view
	// reconcile_transfers_v4): a batch's id for its leg, a batch reversal's id for a leg
	// reversal, the transfer's own id otherwise; "" is the own id.
	EntryKey string
}

// Key is the entry key that posts t.
func (t SourceTransfer) Key() string {
	if t.EntryKey != "" {
		return t.EntryKey
	}
	return t.ID
}

// InBatch reports whether t is posted as a leg of a batch entry (or of a batch reversal's).
func (t SourceTransfer) InBatch() bool { return t.Key() != t.ID }

// TransferSource is the wallet's side of a reconciliation. The GL never imports the wallet:
// adapters read what the wallet publishes (walletapi: its HTTP API; postgres.WalletView: the
// versioned read-only view reconcile_transfers_v2 of its database).
type TransferSource interface {
	// Transfers returns every transfer the wallet holds.
	Transfers(ctx context.Context) ([]SourceTransfer, error)
	// Transfer returns one transfer; found is false when the wallet has none with this id.
	Transfer(ctx context.Context, id string) (t SourceTransfer, found bool, err error)
}

// EntryLister pages through the ledger's entries with their lines; postgres.Ledger is one.
type EntryLister interface {
	Entries(ctx context.Context, q EntryQuery) (EntryPage, error)
}

// Reconciler compares the wallet's transfers with the ledger's entries.
type Reconciler struct {
	Rules  Rules // every posting rule, to check each entry against the one it was posted by
	Source TransferSource
	Ledger EntryLister
	// SubLedgers, when set and the Source publishes balances (BalanceSource), has Reconcile
	// compare every wallet's balance and held amount with its sub-ledger too.
	SubLedgers SubLedgerReader
}

// Reconcile reads the wallet's transfers, then the ledger's entries, and compares them.
func (r Reconciler) Reconcile(ctx context.Context) (Reconciliation, error) {
	transfers, err := r.Source.Transfers(ctx)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("read the wallet's transfers: %w", err)
	}
	holds, compared, err := readHolds(ctx, r.Source)
	if err != nil {
		return Reconciliation{}, err
	}
	rec, err := r.against(ctx, transfers, holds, compared)
	if err != nil {
		return Reconciliation{}, err
	}
	balances, compared, err := compareBalances(ctx, r.Source, r.SubLedgers)
	if err != nil {
		return Reconciliation{}, err
	}
	rec.BalancesCompared, rec.WalletBalances, rec.MovementsInFlight = compared, balances.Wallets, balances.InFlight
	if balances.Differences != nil {
		rec.Balances = balances.Differences
	}
	return rec, nil
}

// Against compares transfers, a listing of the wallet read earlier, with every entry the
// ledger holds now. The listing must be read before the entries: an entry whose transfer is
// not in it (committed after the listing) is looked up on its own before it counts as extra,
// while a transfer committed after the listing is not compared at all. gl replay reads the
// listing before it starts, so that transfers the wallet makes during the replay, which the
// stream may not hold yet, are not taken for missing history.
func (r Reconciler) Against(ctx context.Context, transfers []SourceTransfer) (Reconciliation, error) {
	return r.against(ctx, transfers, nil, false)
}

// AgainstHolds is Against with holds, the wallet's holds listed with transfers (before the
// entries), compared hold by hold (ReconcileHolds).
func (r Reconciler) AgainstHolds(ctx context.Context, transfers []SourceTransfer, holds []SourceHold) (Reconciliation, error) {
	return r.against(ctx, transfers, holds, true)
}

func (r Reconciler) against(ctx context.Context, transfers []SourceTransfer, holds []SourceHold, compareHolds bool) (Reconciliation, error) {
	var entries []Entry
	after := ""
	for {
		page, err := r.Ledger.Entries(ctx, EntryQuery{After: after, Limit: MaxPageSize})
		if err != nil {
			return Reconciliation{}, fmt.Errorf("read GL entries: %w", err)
		}
		entries = append(entries, page.Entries...)
		if page.NextCursor == "" {
			break
		}
		after = page.NextCursor
	}
	transfers = append([]SourceTransfer(nil), transfers...)
	known := make(map[string]bool, len(transfers))
	for _, t := range transfers {
		known[t.ID], known[t.Key()] = true, true
	}
	for _, e := range entries {
		if known[e.TransferID] || e.HoldID != "" || e.IsAdjustment() { // a hold's movement, an adjustment: no wallet transfer
			continue
		}
		t, found, err := r.Source.Transfer(ctx, e.TransferID)
		if err != nil {
			return Reconciliation{}, fmt.Errorf("read the wallet's transfer %s: %w", e.TransferID, err)
		}
		known[e.TransferID] = true // asked once, even when the transfer has several entries
		if found {
			transfers = append(transfers, t)
		}
	}
	if !compareHolds {
		return Reconcile(r.Rules, transfers, entries), nil
	}
	holds, err := rereadHolds(ctx, r.Source, holds, entries)
	if err != nil {
		return Reconciliation{}, err
	}
	return ReconcileWithHolds(r.Rules, transfers, holds, entries), nil
}

// Difference kinds found by Reconcile.
const (
	DiffMissing   = "missing"   // a wallet transfer with no GL entry
	DiffExtra     = "extra"     // a GL entry for no wallet transfer
	DiffDuplicate = "duplicate" // more than one GL entry for one transfer
	DiffMismatch  = "mismatch"  // the entry's amount, currency or accounts differ from the transfer
)

// Difference is one disagreement between the wallet and the GL, with the ids to look at.
type Difference struct {
	Kind       string `json:"kind"`
	TransferID string `json:"transfer_id"`
	// HoldID is, on a hold's difference, the hold (TransferID is then its movement's key,
	// hold:<id>:placed or hold:<id>:released, as in the GL's entries).
	HoldID   string   `json:"hold_id,omitempty"`
	EntryIDs []string `json:"entry_ids,omitempty"`
	Detail   string   `json:"detail"`
}

// Reconciliation is the outcome of comparing both sides.
type Reconciliation struct {
	Transfers   int          `json:"transfers"`
	Entries     int          `json:"entries"` // transfers' and reversals' entries; holds' are in Holds, adjustments' in neither
	Differences []Difference `json:"differences"`
	// Holds are, per currency, the open holds the GL's entries show against the balance of the
	// hold account (DefaultHoldRules): the GL's own side of the holds, until the wallet
	// publishes its holds for a reconciliation of each hold.
	Holds []HoldTotal `json:"holds,omitempty"`
	// HoldsCompared is true when the wallet's holds were read and compared with the GL's hold
	// entries hold by hold (ReconcileHolds); WalletHolds is then how many it has.
	HoldsCompared bool `json:"holds_compared"`
	WalletHolds   int  `json:"wallet_holds"`
	// BalancesCompared is true when every wallet's balance and held amount were compared with
	// its sub-ledger (CompareBalances); WalletBalances is then how many wallets the wallet has,
	// MovementsInFlight how many of its movements the GL had not posted (left out of the
	// wallets' figures), and Balances each wallet and figure that differ.
	BalancesCompared  bool                `json:"balances_compared"`
	WalletBalances    int                 `json:"wallet_balances"`
	MovementsInFlight int                 `json:"movements_in_flight"`
	Balances          []BalanceDifference `json:"balances"`
}

// HoldTotal is one currency's open holds (placed, not released) and the hold account's balance;
// they must be equal.
type HoldTotal struct {
	Currency       string `json:"currency"`
	Placed         int    `json:"placed"`
	Open           int    `json:"open"`
	OpenAmount     Sum    `json:"open_amount"`
	AccountBalance Sum    `json:"account_balance"`
}

// DiffHolds is a currency whose hold account's balance is not the total of its open holds.
const DiffHolds = "holds"

// HoldTotals totals, per currency, the open holds of entries and the balance of rules' hold
// account over all of them, by currency.
func HoldTotals(rules HoldRules, entries []Entry) []HoldTotal {
	totals := map[string]*HoldTotal{}
	total := func(currency string) *HoldTotal {
		if t, ok := totals[currency]; ok {
			return t
		}
		t := &HoldTotal{Currency: currency}
		totals[currency] = t
		return t
	}
	released := map[string]bool{}
	for _, e := range entries {
		if e.HoldID != "" && e.TransferID == HoldReleasedKey(e.HoldID) {
			released[e.HoldID] = true
		}
	}
	account := rules.HoldAccount()
	for _, e := range entries {
		if e.IsAdjustment() { // no hold's: a wallet's held amount against its sub-account shows it
			continue
		}
		if e.HoldID != "" && e.TransferID == HoldPlacedKey(e.HoldID) {
			t := total(e.Currency)
			t.Placed++
			if !released[e.HoldID] {
				t.Open++
				t.OpenAmount = t.OpenAmount.Add(SumOf(e.Debits()))
			}
		}
		for _, l := range e.Lines {
			if l.AccountCode != account {
				continue
			}
			t := total(e.LineCurrency(l))
			if l.Direction == Credit {
				t.AccountBalance = t.AccountBalance.Add(SumOf(l.Amount))
			} else {
				t.AccountBalance = t.AccountBalance.Sub(SumOf(l.Amount))
			}
		}
	}
	out := make([]HoldTotal, 0, len(totals))
	for _, t := range totals {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Currency < out[j].Currency })
	return out
}

// Agree reports whether both sides hold the same postings.
func (r Reconciliation) Agree() bool { return len(r.Differences) == 0 && len(r.Balances) == 0 }

// Reconcile compares the wallet's transfers with the GL's entries: every transfer must have
// exactly one entry with its amount and currency, posted by the rule in force for the entry's
// event type and kind at its time (one debit line on the rule's debit account and one credit
// line on its credit account; a reversal its original's accounts the other way round, linked
// to its original's entry), and the GL must hold nothing else. A transfer's reversals total at
// most its amount.
//
// Holds' entries are no transfers: they are left out of that comparison and totalled per
// currency instead (HoldTotals by DefaultHoldRules), the hold account's balance against the
// open holds. Adjustments' entries are no movement of the wallet: they are left out of both;
// one that changes a wallet's sub-account shows in the comparison of balances (CompareBalances)
// until a matching movement in the wallet evens it out.
func Reconcile(rules Rules, transfers []SourceTransfer, entries []Entry) Reconciliation {
	return reconcile(rules, transfers, entries, nil)
}

// ReconcileWithHolds is Reconcile, and compares each of the wallet's holds with the GL's hold
// entries (ReconcileHolds by DefaultHoldRules) besides their totals.
func ReconcileWithHolds(rules Rules, transfers []SourceTransfer, holds []SourceHold, entries []Entry) Reconciliation {
	if holds == nil {
		holds = []SourceHold{}
	}
	return reconcile(rules, transfers, entries, holds)
}

// reconcile compares holds too unless holds is nil.
func reconcile(rules Rules, transfers []SourceTransfer, entries []Entry, holds []SourceHold) Reconciliation {
	r := Reconciliation{Transfers: len(transfers), Differences: []Difference{}, Balances: []BalanceDifference{}}
	byTransfer := map[string][]Entry{}
	for _, e := range entries {
		if e.HoldID != "" || e.IsAdjustment() {
			continue
		}
		r.Entries++
		byTransfer[e.TransferID] = append(byTransfer[e.TransferID], e)
	}
	r.holdTotals(entries)
	known := make(map[string]bool, len(transfers))
	legs := map[string][]SourceTransfer{} // by batch entry key
	for _, t := range transfers {
		if t.InBatch() {
			known[t.Key()] = true
			legs[t.Key()] = append(legs[t.Key()], t)
			continue
		}
		known[t.ID] = true
		posted := byTransfer[t.ID]
		switch {
		case len(posted) == 0:
			r.add(DiffMissing, t.ID, nil, "transfer of %s %s has no GL entry", money.Format(t.Amount, t.Currency), t.Currency)
		case len(posted) > 1:
			r.add(DiffDuplicate, t.ID, entryIDs(posted), "transfer posted %d times", len(posted))
		default:
			if why := mismatch(rules, t, posted[0], byTransfer[t.ReversesTransferID]); why != "" {
				r.add(DiffMismatch, t.ID, entryIDs(posted), "%s", why)
			}
		}
	}
	r.batchLegs(rules, transfers, legs, byTransfer)
	r.reversalTotals(transfers)
	if holds != nil {
		r.HoldsCompared, r.WalletHolds = true, len(holds)
		r.Differences = append(r.Differences, ReconcileHolds(DefaultHoldRules, holds, entries)...)
	}
	for transferID, posted := range byTransfer {
		if !known[transferID] {
			r.add(DiffExtra, transferID, entryIDs(posted), "GL entry for a transfer the wallet does not have")
		}
	}
	sort.Slice(r.Differences, func(i, j int) bool {
		a, b := r.Differences[i], r.Differences[j]
		return a.Kind < b.Kind || a.Kind == b.Kind && a.TransferID < b.TransferID
	})
	return r
}

func (r *Reconciliation) add(kind, transferID string, entries []string, format string, args ...any) {
	r.Differences = append(r.Differences, Difference{Kind: kind, TransferID: transferID, EntryIDs: entries, Detail: fmt.Sprintf(format, args...)})
}

// holdTotals totals the holds by currency and reports a currency whose hold account is not
// its open holds' total.
func (r *Reconciliation) holdTotals(entries []Entry) {
	r.Holds = HoldTotals(DefaultHoldRules, entries)
	for _, t := range r.Holds {
		if !t.AccountBalance.Equal(t.OpenAmount) {
			r.add(DiffHolds, "", nil, "%s: account %s holds %s, the %d open holds total %s",
				t.Currency, DefaultHoldRules.HoldAccount(), t.AccountBalance, t.Open, t.OpenAmount)
		}
	}
}

// reversalTotals reports a transfer whose reversals, as the wallet lists them, total more than
// its amount.
func (r *Reconciliation) reversalTotals(transfers []SourceTransfer) {
	amounts := map[string]int64{}
	reversed := map[string]int64{}
	for _, t := range transfers {
		if t.ReversesTransferID == "" {
			amounts[t.ID] = t.Amount
		} else {
			reversed[t.ReversesTransferID] += t.Amount
		}
	}
	for id, total := range reversed {
		if amount, ok := amounts[id]; ok && total > amount {
			r.add(DiffMismatch, id, nil, "reversals total %d, the transfer moved %d", total, amount)
		}
	}
}

// mismatch explains how e differs from what t must be posted as: a transfer by the rule in
// force for its event type, kind and time; a reversal with its original's accounts swapped and
// linked to its original's entry (originals: the entries of the transfer it reverses), which
// thus follows whatever rule posted the original.
func mismatch(rules Rules, t SourceTransfer, e Entry, originals []Entry) string {
	if e.Currency != t.Currency {
		return fmt.Sprintf("currency %s in the wallet, %s in the GL", t.Currency, e.Currency)
	}
	var want map[Direction]string
	if t.ReversesTransferID != "" {
		switch {
		case len(originals) != 1:
			return fmt.Sprintf("reversal of transfer %s, which has %d GL entries", t.ReversesTransferID, len(originals))
		case e.ReversesEntryID != originals[0].ID:
			return fmt.Sprintf("reversal entry reverses entry %s, transfer %s's entry is %s", e.ReversesEntryID, t.ReversesTransferID, originals[0].ID)
		}
		orig := originals[0]
		rule, ok := rules.At(orig.EventType, orig.Kind, orig.Currency, orig.OccurredAt)
		if !ok {
			return fmt.Sprintf("no posting rule for the original's %s kind %s at %s", orig.EventType, orig.Kind, orig.OccurredAt.Format(time.RFC3339))
		}
		want = map[Direction]string{Debit: rule.CreditAccount, Credit: rule.DebitAccount}
	} else {
		if e.ReversesEntryID != uuid.Nil {
			return fmt.Sprintf("a transfer in the wallet, a reversal of entry %s in the GL", e.ReversesEntryID)
		}
		if t.Kind != "" && e.Kind != contract.KindUnspecified && e.Kind != t.Kind {
			return fmt.Sprintf("a %s in the wallet, posted as a %s in the GL", t.Kind, e.Kind)
		}
		rule, ok := rules.At(e.EventType, e.Kind, e.Currency, e.OccurredAt)
		if !ok {
			return fmt.Sprintf("no posting rule for %s kind %s at %s", e.EventType, e.Kind, e.OccurredAt.Format(time.RFC3339))
		}
		want = map[Direction]string{Debit: rule.DebitAccount, Credit: rule.CreditAccount}
	}
	return linesMismatch(e.Lines, t.Amount, want, "the posting rule")
}

// linesMismatch explains how lines differ from the two a rule makes for amount: one on each
// account of want, by direction; rule names the rule in the explanation.
func linesMismatch(lines []Line, amount int64, want map[Direction]string, rule string) string {
	if len(lines) != 2 {
		return fmt.Sprintf("entry has %d lines, %s makes 2", len(lines), rule)
	}
	for _, l := range lines {
		if l.Amount != amount {
			return fmt.Sprintf("amount %d in the wallet, %s line of %d in the GL", amount, l.Direction, l.Amount)
		}
		if want[l.Direction] != l.AccountCode {
			return fmt.Sprintf("%s line on account %s, %s says %s", l.Direction, l.AccountCode, rule, want[l.Direction])
		}
		delete(want, l.Direction)
	}
	if len(want) > 0 {
		return "entry lacks a debit or a credit line"
	}
	return ""
}

func entryIDs(entries []Entry) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID.String()
	}
	return ids
}

// batchLegs compares each batch entry with the wallet's legs it posts (legs, by entry key):
// each leg's lines, found by its tag, must be the two its kind's TransferCompleted.v2 rule
// makes for its amount in its currency (a leg reversal's: its leg's lines swapped, each naming
// the line it reverses); a leg without lines is missing, a tag of no leg of the wallet's extra,
// a batch entry posted twice a duplicate. Differences name the leg.
func (r *Reconciliation) batchLegs(rules Rules, transfers []SourceTransfer, legs map[string][]SourceTransfer, byTransfer map[string][]Entry) {
	byID := make(map[string]SourceTransfer, len(transfers))
	for _, t := range transfers {
		byID[t.ID] = t
	}
	for key, group := range legs {
		posted := byTransfer[key]
		if len(posted) != 1 {
			for _, t := range group {
				if len(posted) == 0 {
					r.add(DiffMissing, t.ID, nil, "leg of %s %s of batch entry %s, which the GL does not have", money.Format(t.Amount, t.Currency), t.Currency, key)
				} else {
					r.add(DiffDuplicate, t.ID, entryIDs(posted), "batch entry %s posted %d times", key, len(posted))
				}
			}
			continue
		}
		e := posted[0]
		lines := map[string][]Line{}
		for _, l := range e.Lines {
			lines[l.TransferID] = append(lines[l.TransferID], l)
		}
		for _, t := range group {
			own := lines[t.ID]
			delete(lines, t.ID)
			if len(own) == 0 {
				r.add(DiffMissing, t.ID, entryIDs(posted), "leg of %s %s has no lines in batch entry %s", money.Format(t.Amount, t.Currency), t.Currency, key)
				continue
			}
			if why := legMismatch(rules, t, e, own, byID, byTransfer); why != "" {
				r.add(DiffMismatch, t.ID, entryIDs(posted), "%s", why)
			}
		}
		for tag := range lines {
			r.add(DiffExtra, tag, entryIDs(posted), "lines of batch entry %s for a leg the wallet does not have", key)
		}
	}
}

// legMismatch explains how a leg's lines of batch entry e differ from what leg t must be
// posted as.
func legMismatch(rules Rules, t SourceTransfer, e Entry, lines []Line, byID map[string]SourceTransfer, byTransfer map[string][]Entry) string {
	for _, l := range lines {
		if c := e.LineCurrency(l); c != t.Currency {
			return fmt.Sprintf("currency %s in the wallet, %s in the GL", t.Currency, c)
		}
	}
	if t.ReversesTransferID == "" {
		if t.Kind == "" {
			return linesMismatch(lines, t.Amount, map[Direction]string{Debit: lines[0].AccountCode, Credit: lines[len(lines)-1].AccountCode}, "its leg")
		}
		rule, ok := rules.At(contract.TypeTransferCompletedV2, t.Kind, t.Currency, e.OccurredAt)
		if !ok {
			return fmt.Sprintf("no posting rule for %s kind %s at %s", contract.TypeTransferCompletedV2, t.Kind, e.OccurredAt.Format(time.RFC3339))
		}
		return linesMismatch(lines, t.Amount, map[Direction]string{Debit: rule.DebitAccount, Credit: rule.CreditAccount}, "the posting rule")
	}
	leg, ok := byID[t.ReversesTransferID]
	if !ok {
		return fmt.Sprintf("reversal of transfer %s, which the wallet does not list", t.ReversesTransferID)
	}
	originals := byTransfer[leg.Key()]
	if len(originals) != 1 || e.ReversesEntryID != originals[0].ID {
		return fmt.Sprintf("batch reversal entry reverses entry %s, not the one entry of leg %s's batch %s", e.ReversesEntryID, leg.ID, leg.Key())
	}
	want := map[Direction]string{}
	reversed := map[int64]bool{}
	for _, l := range originals[0].Lines {
		if l.TransferID == leg.ID {
			want[opposite(l.Direction)] = l.AccountCode
			reversed[l.ID] = true
		}
	}
	for _, l := range lines {
		if !reversed[l.ReversesLineID] {
			return fmt.Sprintf("%s line of %d reverses line %d, not a line of leg %s", l.Direction, l.Amount, l.ReversesLineID, leg.ID)
		}
	}
	return linesMismatch(lines, t.Amount, want, "its leg's lines swapped")
}
