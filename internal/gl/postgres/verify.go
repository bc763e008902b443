package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/internal/gldb"
)

// offender is what the verify queries return per offending row.
type offender struct {
	id    string
	total int64
}

// Verify checks the GL's invariants on the live database: every entry balances, the trial
// balance nets to zero per currency, and the inbox and the entries agree both ways (each
// processed TransferCompleted.v1, TransferReversed.v1 or Hold*.v1 has its entry, each entry
// posted within inboxRetention its processed inbox row: the inbox deletes older rows; 0 checks
// every entry). Adjustments, posted by the API and not from events, are left out of the
// inbox and posting-rule checks and checked against their adjustment rows instead. It reads without locking; run it on a quiet ledger or accept that an entry
// committing meanwhile may show in one check and not yet in another.
func (l *Ledger) Verify(ctx context.Context, inboxRetention time.Duration) ([]gl.Check, error) {
	q := l.queries
	const consumer = events.ConsumerGL
	eventTypes := postedEventTypes()
	counts, err := q.CountLedger(ctx)
	if err != nil {
		return nil, fmt.Errorf("count entries: %w", interpretError(err))
	}
	var checks []gl.Check

	unbalanced, err := q.UnbalancedEntries(ctx, gl.MaxOffenders)
	if err != nil {
		return nil, fmt.Errorf("find unbalanced entries: %w", interpretError(err))
	}
	rows := make([]offender, 0, len(unbalanced))
	for _, r := range unbalanced {
		rows = append(rows, offender{r.ID.String(), r.Total})
	}
	checks = append(checks, check("every entry balances (debits = credits in each currency, lines in the entry's currency unless it is XXX, two lines or more)", counts.Entries, rows))

	tb, err := l.TrialBalance(ctx)
	if err != nil {
		return nil, err
	}
	rows = rows[:0]
	for _, c := range tb.Currencies {
		if !c.Balanced {
			rows = append(rows, offender{fmt.Sprintf("%s (debits %s, credits %s)", c.Currency, c.Debits, c.Credits), 0})
		}
	}
	for i := range rows {
		rows[i].total = int64(len(rows))
	}
	checks = append(checks, check("the trial balance nets to zero in every currency", int64(len(tb.Currencies)), rows))

	processed, err := q.CountProcessedInbox(ctx, gldb.CountProcessedInboxParams{Consumer: consumer, EventTypes: eventTypes})
	if err != nil {
		return nil, fmt.Errorf("count processed inbox rows: %w", interpretError(err))
	}
	missing, err := q.ProcessedInboxWithoutEntry(ctx, gldb.ProcessedInboxWithoutEntryParams{
		Consumer: consumer, EventTypes: eventTypes, RowLimit: gl.MaxOffenders,
	})
	if err != nil {
		return nil, fmt.Errorf("find processed events without entry: %w", interpretError(err))
	}
	rows = rows[:0]
	for _, r := range missing {
		rows = append(rows, offender{r.ID, r.Total})
	}
	checks = append(checks, check("every processed TransferCompleted (v1, v2), TransferReversed.v1, TransferBatch*.v1 and Hold*.v1 in the inbox has its entry", processed, rows))

	ruled, err := q.CountRuledEntries(ctx)
	if err != nil {
		return nil, fmt.Errorf("count entries posted by rule: %w", interpretError(err))
	}
	offRule, err := q.EntriesOffRule(ctx, gl.MaxOffenders)
	if err != nil {
		return nil, fmt.Errorf("find entries off their posting rule: %w", interpretError(err))
	}
	rows = rows[:0]
	for _, r := range offRule {
		rows = append(rows, offender{r.ID.String(), r.Total})
	}
	checks = append(checks, check("every entry's lines are those of the posting rule in force for its event type, kind and time", ruled, rows))

	batches, err := l.verifyBatches(ctx)
	if err != nil {
		return nil, err
	}
	checks = append(checks, batches)

	reversed, err := q.CountReversedEntries(ctx)
	if err != nil {
		return nil, fmt.Errorf("count reversed entries: %w", interpretError(err))
	}
	beyond, err := q.ReversalsBeyondOriginal(ctx, gl.MaxOffenders)
	if err != nil {
		return nil, fmt.Errorf("find reversals beyond their original: %w", interpretError(err))
	}
	rows = rows[:0]
	for _, r := range beyond {
		rows = append(rows, offender{r.ID.String(), r.Total})
	}
	checks = append(checks, check("every reversed entry's reversals total at most its amount, in its currency, and reverse no reversal", reversed, rows))

	// An entry is posted in the transaction that claims its inbox row, a moment after the claim:
	// a tenth of the retention is left as a margin before rows the retention may have deleted.
	var within pgtype.Float8
	if inboxRetention > 0 {
		within = pgtype.Float8{Float64: 0.9 * inboxRetention.Seconds(), Valid: true}
	}
	orphans, err := q.EntriesWithoutInbox(ctx, gldb.EntriesWithoutInboxParams{Consumer: consumer, WithinSeconds: within, RowLimit: gl.MaxOffenders})
	if err != nil {
		return nil, fmt.Errorf("find entries without inbox row: %w", interpretError(err))
	}
	rows = rows[:0]
	for _, r := range orphans {
		rows = append(rows, offender{r.ID.String(), r.Total})
	}
	what := "every entry has its processed inbox row (" + consumer + ":<event id>)"
	if inboxRetention > 0 {
		what = fmt.Sprintf("every entry posted in the last %s (nine tenths of EVENTS_INBOX_RETENTION) has its processed inbox row (%s:<event id>)",
			time.Duration(within.Float64*float64(time.Second)).Round(time.Second), consumer)
	}
	checks = append(checks, check(what, counts.Entries-counts.AdjustmentEntries, rows))

	adjustments, err := l.verifyAdjustments(ctx)
	if err != nil {
		return nil, err
	}
	checks = append(checks, adjustments)

	holds, err := l.verifyHolds(ctx)
	if err != nil {
		return nil, err
	}
	checks = append(checks, holds...)

	sub, err := l.verifySubLedgers(ctx)
	if err != nil {
		return nil, err
	}
	checks = append(checks, sub)

	cp, err := l.verifyCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	return append(checks, cp), nil
}

// verifyBatches checks that every line of a batch's entry (or a batch reversal's) carries its
// leg tag, and that each leg of a batch is two lines a TransferCompleted.v2 rule in force for
// its currency at the batch's time makes.
func (l *Ledger) verifyBatches(ctx context.Context) (gl.Check, error) {
	checked, err := l.queries.CountBatchEntries(ctx)
	if err != nil {
		return gl.Check{}, fmt.Errorf("count batch entries: %w", interpretError(err))
	}
	off, err := l.queries.BatchEntriesOffLegs(ctx, gl.MaxOffenders)
	if err != nil {
		return gl.Check{}, fmt.Errorf("find batch entries off their legs: %w", interpretError(err))
	}
	rows := make([]offender, 0, len(off))
	for _, r := range off {
		rows = append(rows, offender{r.ID.String(), r.Total})
	}
	return check("every line of a batch entry carries its leg's id, each leg two lines of its kind's TransferCompleted.v2 rule in force", checked, rows), nil
}

// postedEventTypes are the events the GL consumer posts an entry for.
func postedEventTypes() []string {
	return append([]string{contract.TypeTransferCompleted, contract.TypeTransferCompletedV2, contract.TypeTransferReversed,
		contract.TypeTransferBatchCompleted, contract.TypeTransferBatchReversed}, gl.HoldEventTypes...)
}

// verifyAdjustments checks that every adjustment entry has its adjustment row and every row
// its adjustment entry: adjustments are posted by the API, not from events, so the inbox and
// the posting rules say nothing of them.
func (l *Ledger) verifyAdjustments(ctx context.Context) (gl.Check, error) {
	checked, err := l.queries.CountAdjustments(ctx)
	if err != nil {
		return gl.Check{}, fmt.Errorf("count adjustments: %w", interpretError(err))
	}
	apart, err := l.queries.AdjustmentsApart(ctx, gl.MaxOffenders)
	if err != nil {
		return gl.Check{}, fmt.Errorf("find adjustments apart from their entries: %w", interpretError(err))
	}
	rows := make([]offender, 0, len(apart))
	for _, r := range apart {
		rows = append(rows, offender{r.ID, r.Total})
	}
	return check("every adjustment entry has its adjustment (reason, key, API key) and every adjustment its entry", checked, rows), nil
}

// verifyHolds checks the holds' postings: every release has its placement, in its
// currency and amount; per currency, the hold account never went negative and equals the open
// holds' total.
func (l *Ledger) verifyHolds(ctx context.Context) ([]gl.Check, error) {
	released, err := l.queries.CountHoldReleases(ctx)
	if err != nil {
		return nil, fmt.Errorf("count hold releases: %w", interpretError(err))
	}
	orphans, err := l.queries.HoldReleasesWithoutPlacement(ctx, gl.MaxOffenders)
	if err != nil {
		return nil, fmt.Errorf("find hold releases without placement: %w", interpretError(err))
	}
	rows := make([]offender, 0, len(orphans))
	for _, r := range orphans {
		rows = append(rows, offender{r.ID.String(), r.Total})
	}
	checks := []gl.Check{check("every hold's release has its placement, in its currency and amount", released, rows)}

	account := gl.DefaultHoldRules.HoldAccount()
	totals, err := l.queries.HoldAccountTotals(ctx, account)
	if err != nil {
		return nil, fmt.Errorf("total account %s and the open holds: %w", account, interpretError(err))
	}
	var negative, apart []offender
	for _, t := range totals {
		lowest, balance, open, err := holdTotals(t)
		if err != nil {
			return nil, fmt.Errorf("totals of account %s in %s: %w", account, t.Currency, err)
		}
		if lowest.Cmp(gl.Sum{}) < 0 {
			negative = append(negative, offender{fmt.Sprintf("%s (lowest %s)", t.Currency, lowest), 0})
		}
		if !balance.Equal(open) {
			apart = append(apart, offender{fmt.Sprintf("%s (balance %s, open holds %s)", t.Currency, balance, open), 0})
		}
	}
	return append(checks,
		check("account "+account+" (funds on hold) never went negative in any currency", int64(len(totals)), counted(negative)),
		check("account "+account+"'s balance equals the open holds' total in every currency", int64(len(totals)), counted(apart)),
	), nil
}

// verifySubLedgers checks that every control account of wallets equals the sum of its wallets'
// sub-accounts in every currency: that each of its lines names a wallet. The database refuses
// such a line without one; a line written around it, or posted before sub-ledgers and not
// placed by their migration, is what this finds.
func (l *Ledger) verifySubLedgers(ctx context.Context) (gl.Check, error) {
	totals, err := l.queries.WalletControlTotals(ctx)
	if err != nil {
		return gl.Check{}, fmt.Errorf("total the wallet control accounts and their sub-accounts: %w", interpretError(err))
	}
	var apart []offender
	for _, t := range totals {
		balance, err := sumFrom(t.Balance)
		if err != nil {
			return gl.Check{}, fmt.Errorf("balance of account %s in %s: %w", t.AccountCode, t.Currency, err)
		}
		wallets, err := sumFrom(t.Wallets)
		if err != nil {
			return gl.Check{}, fmt.Errorf("sub-accounts of account %s in %s: %w", t.AccountCode, t.Currency, err)
		}
		if !balance.Equal(wallets) || t.WithoutWallet > 0 {
			apart = append(apart, offender{fmt.Sprintf("%s %s (balance %s, wallets' sub-accounts %s, %d lines without a wallet)",
				t.AccountCode, t.Currency, balance, wallets, t.WithoutWallet), 0})
		}
	}
	return check("every wallet control account equals the sum of its wallets' sub-accounts in every currency", int64(len(totals)), counted(apart)), nil
}

func holdTotals(t gldb.HoldAccountTotalsRow) (lowest, balance, open gl.Sum, err error) {
	if lowest, err = sumFrom(t.Lowest); err != nil {
		return
	}
	if balance, err = sumFrom(t.Balance); err != nil {
		return
	}
	open, err = sumFrom(t.OpenHolds)
	return
}

// counted sets each offender's total to their number (offenders found in Go, not by a query).
func counted(rows []offender) []offender {
	for i := range rows {
		rows[i].total = int64(len(rows))
	}
	return rows
}

// verifyCheckpoint sums the lines the latest balance checkpoint totals again, in full: every
// balance read builds on it.
func (l *Ledger) verifyCheckpoint(ctx context.Context) (gl.Check, error) {
	checked, err := l.queries.CountLatestCheckpoint(ctx)
	if err != nil {
		return gl.Check{}, fmt.Errorf("count checkpoint totals: %w", interpretError(err))
	}
	mismatches, err := l.queries.CheckpointMismatches(ctx, gl.MaxOffenders)
	if err != nil {
		return gl.Check{}, fmt.Errorf("compare the latest balance checkpoint: %w", interpretError(err))
	}
	rows := make([]offender, 0, len(mismatches))
	for _, r := range mismatches {
		rows = append(rows, offender{r.ID, r.Total})
	}
	return check("the latest balance checkpoint equals the sums of the lines it covers", checked, rows), nil
}

func check(name string, checked int64, rows []offender) gl.Check {
	c := gl.Check{Name: name, Checked: checked, Offenders: []string{}}
	for _, r := range rows {
		c.Failures = r.total
		if len(c.Offenders) < gl.MaxOffenders {
			c.Offenders = append(c.Offenders, r.id)
		}
	}
	return c
}

// Size counts the ledger's entries and the events its inbox marked processed; a rebuild
// starts only from a ledger where both are zero.
func (l *Ledger) Size(ctx context.Context) (entries, processedEvents int64, err error) {
	counts, err := l.queries.CountLedger(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("count entries: %w", interpretError(err))
	}
	processed, err := l.queries.CountProcessedInbox(ctx, gldb.CountProcessedInboxParams{
		Consumer: events.ConsumerGL, EventTypes: postedEventTypes(),
	})
	if err != nil {
		return 0, 0, fmt.Errorf("count processed inbox rows: %w", interpretError(err))
	}
	return counts.Entries, processed, nil
}
