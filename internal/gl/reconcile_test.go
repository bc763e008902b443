package gl_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
)

func entry(transferID string, amount int64, debit, credit string) gl.Entry {
	return gl.Entry{ID: uuid.New(), TransferID: transferID, Currency: "USD", EventType: contract.TypeTransferCompleted, Kind: contract.KindUnspecified, Lines: []gl.Line{
		{AccountCode: debit, Direction: gl.Debit, Amount: amount},
		{AccountCode: credit, Direction: gl.Credit, Amount: amount},
	}}
}

func TestReconcileFindsEveryKindOfDifference(t *testing.T) {
	t.Parallel()
	rule := gl.DefaultRules()
	transfers := []gl.SourceTransfer{
		{ID: "ok", Amount: 10, Currency: "USD"},
		{ID: "twice", Amount: 10, Currency: "USD"},
		{ID: "wrong-account", Amount: 10, Currency: "USD"},
		{ID: "wrong-currency", Amount: 10, Currency: "EUR"},
		{ID: "never", Amount: 10, Currency: "USD"},
	}
	entries := []gl.Entry{
		entry("ok", 10, "1010", "2010"),
		entry("twice", 10, "1010", "2010"), entry("twice", 10, "1010", "2010"),
		entry("wrong-account", 10, "1010", "9999"),
		entry("wrong-currency", 10, "1010", "2010"),
		entry("stranger", 10, "1010", "2010"),
	}
	r := gl.Reconcile(rule, transfers, entries)
	require.False(t, r.Agree())
	kinds := map[string]string{}
	for _, d := range r.Differences {
		kinds[d.TransferID] = d.Kind
	}
	require.Equal(t, map[string]string{
		"twice": gl.DiffDuplicate, "wrong-account": gl.DiffMismatch, "wrong-currency": gl.DiffMismatch,
		"never": gl.DiffMissing, "stranger": gl.DiffExtra,
	}, kinds)

	require.True(t, gl.Reconcile(rule, transfers[:1], entries[:1]).Agree())
}

// fakeSource is a wallet with transfers; lookups counts Transfer calls.
type fakeSource struct {
	transfers map[string]gl.SourceTransfer
	lookups   []string
}

func (f *fakeSource) Transfers(context.Context) ([]gl.SourceTransfer, error) {
	out := make([]gl.SourceTransfer, 0, len(f.transfers))
	for _, t := range f.transfers {
		out = append(out, t)
	}
	return out, nil
}

func (f *fakeSource) Transfer(_ context.Context, id string) (gl.SourceTransfer, bool, error) {
	f.lookups = append(f.lookups, id)
	t, ok := f.transfers[id]
	return t, ok, nil
}

// pagedLedger hands out its entries two per page.
type pagedLedger []gl.Entry

func (l pagedLedger) Entries(_ context.Context, q gl.EntryQuery) (gl.EntryPage, error) {
	start := 0
	if q.After != "" {
		start, _ = strconv.Atoi(q.After)
	}
	end := min(start+2, len(l))
	page := gl.EntryPage{Entries: l[start:end]}
	if end < len(l) {
		page.NextCursor = strconv.Itoa(end)
	}
	return page, nil
}

func TestReconcilerLooksUpWhatTheListingLacks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	source := &fakeSource{transfers: map[string]gl.SourceTransfer{
		"early": {ID: "early", Amount: 10, Currency: "USD"},
		"late":  {ID: "late", Amount: 20, Currency: "USD"},  // committed after the listing, posted
		"later": {ID: "later", Amount: 30, Currency: "USD"}, // committed after the listing, not posted yet
	}}
	listing := []gl.SourceTransfer{source.transfers["early"]}
	ledger := pagedLedger{
		entry("early", 10, "1010", "2010"), entry("late", 20, "1010", "2010"),
		entry("stranger", 5, "1010", "2010"), entry("stranger", 5, "1010", "2010"),
		entry("late-wrong", 1, "1010", "2010"),
	}
	source.transfers["late-wrong"] = gl.SourceTransfer{ID: "late-wrong", Amount: 2, Currency: "USD"}
	r := gl.Reconciler{Rules: gl.DefaultRules(), Source: source, Ledger: ledger}

	rec, err := r.Against(ctx, listing)
	require.NoError(t, err)
	require.Equal(t, 3, rec.Transfers, "the listing plus the two transfers found on their own")
	require.Equal(t, 5, rec.Entries, "every page of entries is read")
	require.Equal(t, []string{"late", "stranger", "late-wrong"}, source.lookups, "each unknown transfer is asked for once")
	kinds := map[string]string{}
	for _, d := range rec.Differences {
		kinds[d.TransferID] = d.Kind
	}
	require.Equal(t, map[string]string{"stranger": gl.DiffExtra, "late-wrong": gl.DiffMismatch}, kinds,
		"a transfer made after the listing and not posted yet is not missing")

	source.lookups = nil
	rec, err = r.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"stranger"}, source.lookups)
	require.Len(t, rec.Differences, 3, "read now, the unposted transfer is missing")
}

func holdEntry(holdID, key string, amount int64, debit, credit string) gl.Entry {
	e := entry(key, amount, debit, credit)
	e.HoldID = holdID
	return e
}

func TestReconcileLeavesHoldsOutOfTheTransfersAndTotalsThem(t *testing.T) {
	t.Parallel()
	transfers := []gl.SourceTransfer{{ID: "capture", Amount: 60, Currency: "USD"}}
	entries := []gl.Entry{
		entry("capture", 60, "1010", "2010"),
		holdEntry("h1", gl.HoldPlacedKey("h1"), 100, "2010", "2020"),
		holdEntry("h1", gl.HoldReleasedKey("h1"), 100, "2020", "2010"),
		holdEntry("h2", gl.HoldPlacedKey("h2"), 30, "2010", "2020"),
	}
	r := gl.Reconcile(gl.DefaultRules(), transfers, entries)
	require.True(t, r.Agree(), "%+v", r.Differences)
	require.Equal(t, 1, r.Entries, "hold entries are no transfers' entries")
	require.Equal(t, []gl.HoldTotal{{Currency: "USD", Placed: 2, Open: 1, OpenAmount: gl.SumOf(30), AccountBalance: gl.SumOf(30)}}, r.Holds)

	// A release the GL holds without its placement leaves 2020 apart from the open holds.
	entries = append(entries, holdEntry("h3", gl.HoldReleasedKey("h3"), 5, "2020", "2010"))
	r = gl.Reconcile(gl.DefaultRules(), transfers, entries)
	require.Len(t, r.Differences, 1)
	require.Equal(t, gl.DiffHolds, r.Differences[0].Kind)
	require.Contains(t, r.Differences[0].Detail, "account 2020 holds 25, the 1 open holds total 30")
}

func TestReconcileChecksEachEntryAgainstTheRuleOfItsKindAndTime(t *testing.T) {
	t.Parallel()
	change := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	rules := gl.NewRules(append(gl.DefaultRules().All(), gl.Rule{
		EventType: contract.TypeTransferCompletedV2, Kind: contract.KindDeposit, EffectiveFrom: change,
		PostingRule: gl.PostingRule{DebitAccount: "1020", CreditAccount: "2010"},
	}))
	v2 := func(id, kind string, at time.Time, debit, credit string) gl.Entry {
		e := entry(id, 10, debit, credit)
		e.EventType, e.Kind, e.OccurredAt = contract.TypeTransferCompletedV2, kind, at
		return e
	}
	before, after := change.Add(-time.Hour), change.Add(time.Hour)
	entries := []gl.Entry{
		v2("deposit-before", contract.KindDeposit, before, "1010", "2010"),
		v2("deposit-after", contract.KindDeposit, after, "1020", "2010"),
		v2("deposit-after-old-rule", contract.KindDeposit, after, "1010", "2010"),
		v2("transfer", contract.KindTransfer, after, "2010", "2010"),
		v2("withdrawal", contract.KindWithdrawal, after, "2010", "1010"),
		v2("kind-differs", contract.KindTransfer, after, "2010", "2010"),
		entry("v1", 10, "1010", "2010"),
	}
	transfers := []gl.SourceTransfer{
		{ID: "deposit-before", Amount: 10, Currency: "USD", Kind: contract.KindDeposit},
		{ID: "deposit-after", Amount: 10, Currency: "USD", Kind: contract.KindDeposit},
		{ID: "deposit-after-old-rule", Amount: 10, Currency: "USD"},
		{ID: "transfer", Amount: 10, Currency: "USD", Kind: contract.KindTransfer},
		{ID: "withdrawal", Amount: 10, Currency: "USD"},
		{ID: "kind-differs", Amount: 10, Currency: "USD", Kind: contract.KindDeposit},
		{ID: "v1", Amount: 10, Currency: "USD", Kind: contract.KindDeposit}, // a v1 entry has no kind to compare
	}
	r := gl.Reconcile(rules, transfers, entries)
	got := map[string]string{}
	for _, d := range r.Differences {
		got[d.TransferID] = d.Detail
	}
	require.Equal(t, map[string]string{
		"deposit-after-old-rule": "debit line on account 1010, the posting rule says 1020",
		"kind-differs":           "a deposit in the wallet, posted as a transfer in the GL",
	}, got)
}

func TestReconcileWithHoldsComparesEachHold(t *testing.T) {
	t.Parallel()
	place := func(id string, amount int64) gl.Entry {
		return holdEntry(id, gl.HoldPlacedKey(id), amount, "2010", "2020")
	}
	release := func(id string, amount int64) gl.Entry {
		return holdEntry(id, gl.HoldReleasedKey(id), amount, "2020", "2010")
	}
	hold := func(id string, amount int64, status string) gl.SourceHold {
		return gl.SourceHold{ID: id, WalletID: "w", Amount: amount, Currency: "USD", Status: status}
	}
	holds := []gl.SourceHold{
		hold("pending-ok", 10, gl.HoldPending),
		hold("captured-ok", 20, gl.HoldCaptured),
		hold("voided-ok", 30, gl.HoldVoided),
		hold("pending-unposted", 40, gl.HoldPending),
		hold("captured-unreleased", 50, gl.HoldCaptured),
		hold("pending-released", 60, gl.HoldPending),
		hold("wrong-amount", 70, gl.HoldPending),
		hold("wrong-currency", 80, gl.HoldPending),
	}
	wrongCurrency := place("wrong-currency", 80)
	wrongCurrency.Currency = "EUR"
	entries := []gl.Entry{
		place("pending-ok", 10),
		place("captured-ok", 20), release("captured-ok", 20),
		place("voided-ok", 30), release("voided-ok", 30),
		place("captured-unreleased", 50),
		place("pending-released", 60), release("pending-released", 60),
		place("wrong-amount", 71),
		wrongCurrency,
		place("stranger", 5),
	}
	r := gl.ReconcileWithHolds(gl.DefaultRules(), nil, holds, entries)
	require.True(t, r.HoldsCompared)
	require.Equal(t, len(holds), r.WalletHolds)
	got := map[string]string{}
	for _, d := range r.Differences {
		if d.Kind == gl.DiffHolds {
			continue // 2020 against the GL's open holds: the currencies' totals
		}
		require.NotEmpty(t, d.HoldID, "%+v", d)
		got[d.TransferID] = d.Kind
	}
	require.Equal(t, map[string]string{
		gl.HoldPlacedKey("pending-unposted"):      gl.DiffMissing,
		gl.HoldReleasedKey("captured-unreleased"): gl.DiffMissing,
		gl.HoldReleasedKey("pending-released"):    gl.DiffExtra,
		gl.HoldPlacedKey("wrong-amount"):          gl.DiffMismatch,
		gl.HoldPlacedKey("wrong-currency"):        gl.DiffMismatch,
		gl.HoldPlacedKey("stranger"):              gl.DiffExtra,
	}, got)

	ok := gl.ReconcileWithHolds(gl.DefaultRules(), nil, holds[:3], entries[:5])
	require.True(t, ok.Agree(), "%+v", ok.Differences)
	require.Equal(t, 3, ok.WalletHolds)

	// Without the wallet's holds, only the totals, as before.
	require.False(t, gl.Reconcile(gl.DefaultRules(), nil, entries[:5]).HoldsCompared)
}

// fakeHoldSource is a wallet with transfers and holds; holdLookups counts Hold calls.
type fakeHoldSource struct {
	fakeSource
	holds       map[string]gl.SourceHold
	listed      []gl.SourceHold
	holdLookups []string
}

func (f *fakeHoldSource) Holds(context.Context) ([]gl.SourceHold, error) { return f.listed, nil }

func (f *fakeHoldSource) Hold(_ context.Context, id string) (gl.SourceHold, bool, error) {
	f.holdLookups = append(f.holdLookups, id)
	h, ok := f.holds[id]
	return h, ok, nil
}

func TestReconcilerRereadsHoldsThatMovedAfterTheListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Listed pending; captured, and its release posted, before the entries were read.
	listedPending := gl.SourceHold{ID: "h1", WalletID: "w", Amount: 10, Currency: "USD", Status: gl.HoldPending}
	now := listedPending
	now.Status = gl.HoldCaptured
	// Placed after the listing.
	late := gl.SourceHold{ID: "h2", WalletID: "w", Amount: 20, Currency: "USD", Status: gl.HoldPending}
	source := &fakeHoldSource{
		fakeSource: fakeSource{transfers: map[string]gl.SourceTransfer{}},
		holds:      map[string]gl.SourceHold{"h1": now, "h2": late},
		listed:     []gl.SourceHold{listedPending},
	}
	ledger := pagedLedger{
		holdEntry("h1", gl.HoldPlacedKey("h1"), 10, "2010", "2020"),
		holdEntry("h1", gl.HoldReleasedKey("h1"), 10, "2020", "2010"),
		holdEntry("h2", gl.HoldPlacedKey("h2"), 20, "2010", "2020"),
		holdEntry("gone", gl.HoldPlacedKey("gone"), 5, "2010", "2020"),
	}
	r := gl.Reconciler{Rules: gl.DefaultRules(), Source: source, Ledger: ledger}
	rec, err := r.Reconcile(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"h1", "h2", "gone"}, source.holdLookups)
	require.True(t, rec.HoldsCompared)
	require.Equal(t, 2, rec.WalletHolds)
	var kinds []string
	for _, d := range rec.Differences {
		kinds = append(kinds, d.Kind+" "+d.TransferID)
	}
	require.Contains(t, kinds, "extra "+gl.HoldPlacedKey("gone"))
	require.NotContains(t, kinds, "extra "+gl.HoldReleasedKey("h1"), "h1 re-read: captured")
}
