package postgres

import (
	"context"
	"fmt"

	"walletgl/internal/events"
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
// processed TransferCompleted.v1 or TransferReversed.v1 has its entry, each entry its processed inbox row). It reads
// without locking; run it on a quiet ledger or accept that an entry committing meanwhile may
// show in one check and not yet in another.
func (l *Ledger) Verify(ctx context.Context) ([]gl.Check, error) {
	q := l.queries
	const consumer = events.ConsumerGL
	eventTypes := []string{events.TypeTransferCompleted, events.TypeTransferCompletedV2, events.TypeTransferReversed}
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
	checks = append(checks, check("every entry balances (debits = credits, one currency, two lines or more)", counts.Entries, rows))

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
	checks = append(checks, check("every processed TransferCompleted (v1, v2) and TransferReversed.v1 in the inbox has its entry", processed, rows))

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

	orphans, err := q.EntriesWithoutInbox(ctx, gldb.EntriesWithoutInboxParams{Consumer: consumer, RowLimit: gl.MaxOffenders})
	if err != nil {
		return nil, fmt.Errorf("find entries without inbox row: %w", interpretError(err))
	}
	rows = rows[:0]
	for _, r := range orphans {
		rows = append(rows, offender{r.ID.String(), r.Total})
	}
	checks = append(checks, check("every entry has its processed inbox row ("+consumer+":<event id>)", counts.Entries, rows))

	cp, err := l.verifyCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	return append(checks, cp), nil
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
		Consumer: events.ConsumerGL, EventTypes: []string{events.TypeTransferCompleted, events.TypeTransferCompletedV2, events.TypeTransferReversed},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("count processed inbox rows: %w", interpretError(err))
	}
	return counts.Entries, processed, nil
}
