package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/database"
	"walletgl/internal/gl"
	"walletgl/internal/gl/postgres/internal/gldb"
	"walletgl/internal/problem"
)

// postingRulesLock is the advisory lock between posting batches (shared) and gl rules set
// (exclusive): "gl_rules" in ASCII.
const postingRulesLock int64 = 0x676c5f72756c6573

// PostingRules reads every posting rule in tx, after taking the rules lock shared: a rule
// being set commits first, and none is set until tx ends. Two statements, not one: under READ
// COMMITTED the read's snapshot must be taken after the lock is granted. The table holds a few
// rows; a batch of events reads it once.
func (l *Ledger) PostingRules(ctx context.Context, tx pgx.Tx) (gl.Rules, error) {
	q := l.queries.WithTx(tx)
	if err := q.LockPostingRulesShared(ctx, postingRulesLock); err != nil {
		return gl.Rules{}, fmt.Errorf("lock posting rules: %w", interpretError(err))
	}
	return listRules(ctx, q)
}

// Rules reads every posting rule, outside any posting (gl rules list, reconcile).
func (l *Ledger) Rules(ctx context.Context) (gl.Rules, error) {
	return listRules(ctx, l.queries)
}

func listRules(ctx context.Context, q *gldb.Queries) (gl.Rules, error) {
	rows, err := q.ListPostingRules(ctx)
	if err != nil {
		return gl.Rules{}, fmt.Errorf("read posting rules: %w", interpretError(err))
	}
	rules := make([]gl.Rule, len(rows))
	for i, r := range rows {
		rules[i] = gl.Rule{
			EventType: r.EventType, Kind: r.Kind, Currency: r.Currency, EffectiveFrom: fromStart(r.EffectiveFrom),
			PostingRule: gl.PostingRule{DebitAccount: r.DebitAccount, CreditAccount: r.CreditAccount},
			CreatedAt:   r.CreatedAt,
		}
	}
	return gl.NewRules(rules), nil
}

// fromStart maps the year 1, as the database reads -infinity, to Go's zero time.
func fromStart(t time.Time) time.Time {
	if t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// ErrRuleInPast refuses a rule that would take effect before now or before an event already
// posted under its event type, kind and currency: it would say otherwise about posted entries.
var ErrRuleInPast = problem.New(problem.Invalid, "rule-in-past", "a posting rule may not take effect before now or before an entry already posted")

// Errors of gl rules set and gl rules withdraw.
var (
	ErrRuleExists   = problem.New(problem.Conflict, "rule-exists", "a posting rule with this event type, kind, currency and effective_from exists already")
	ErrRuleNotFound = problem.New(problem.NotFound, "rule-not-found", "no posting rule has this event type, kind, currency and effective_from")
	ErrRuleInEffect = problem.New(problem.Conflict, "rule-in-effect", "the posting rule is in effect and cannot be withdrawn")
)

// SetRule adds r (gl rules set) after checking it: a known event type and kind, accounts in
// the chart of types its kind may post to (gl.CheckSides), and an effective_from no earlier
// than the database's now nor than the latest entry posted under its type, kind and currency
// (any currency for a rule of any currency). It holds the rules lock exclusively, so that no
// batch posts meanwhile under the rules it read before, and audits the rule in the same
// transaction. The zero EffectiveFrom means now; a rule with the same key is ErrRuleExists.
func (l *Ledger) SetRule(ctx context.Context, r gl.Rule) (gl.Rule, error) {
	if err := r.Validate(); err != nil {
		return gl.Rule{}, err
	}
	if err := r.CheckAccounts(ctx, l); err != nil {
		return gl.Rule{}, err
	}
	return database.WithTxV(ctx, l.pool, func(tx pgx.Tx) (gl.Rule, error) {
		q := l.queries.WithTx(tx)
		now, err := lockRules(ctx, q)
		if err != nil {
			return gl.Rule{}, err
		}
		if r.EffectiveFrom.IsZero() {
			r.EffectiveFrom = now
		}
		latest, err := latestPosted(ctx, q, r)
		if err != nil {
			return gl.Rule{}, err
		}
		switch {
		case r.EffectiveFrom.Before(now):
			return gl.Rule{}, problem.Newf(ErrRuleInPast, "effective_from %s is before now (%s)", r.EffectiveFrom.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
		case !r.EffectiveFrom.After(latest):
			return gl.Rule{}, problem.Newf(ErrRuleInPast, "effective_from %s is not after the latest entry posted for %s kind %s%s (occurred %s)",
				r.EffectiveFrom.Format(time.RFC3339Nano), r.EventType, r.Kind, inCurrency(r.Currency), latest.Format(time.RFC3339Nano))
		}
		r.CreatedAt, err = q.InsertPostingRule(ctx, gldb.InsertPostingRuleParams{
			EventType: r.EventType, Kind: r.Kind, Currency: r.Currency, EffectiveFrom: r.EffectiveFrom,
			DebitAccount: r.DebitAccount, CreditAccount: r.CreditAccount,
		})
		switch err := interpretError(err); {
		case errors.Is(err, errNoRow): // ON CONFLICT DO NOTHING: the key is taken
			return gl.Rule{}, problem.Newf(ErrRuleExists, "a rule for %s kind %s%s from %s exists already (gl rules list; gl rules withdraw it first while it is not in effect)",
				r.EventType, r.Kind, inCurrency(r.Currency), r.EffectiveFrom.Format(time.RFC3339Nano))
		case err != nil:
			return gl.Rule{}, fmt.Errorf("insert rule %s: %w", r.Key(), err)
		}
		if err := l.record(ctx, tx, "rule.set", r.Key(), ruleDetail(r)); err != nil {
			return gl.Rule{}, err
		}
		return r, nil
	})
}

// WithdrawRule deletes the rule of key's event type, kind, currency and effective_from (gl
// rules withdraw) while it is not in effect: its effective_from is after the database's now
// and no entry was posted under it (an event whose own time is at or after it). The trigger
// posting_rules_guard (db/schema/gl/00013) enforces the same for every client. It holds the
// rules lock exclusively, as SetRule does, and audits the withdrawn rule in the same
// transaction.
func (l *Ledger) WithdrawRule(ctx context.Context, key gl.Rule) (gl.Rule, error) {
	if err := key.ValidateKey(); err != nil {
		return gl.Rule{}, err
	}
	return database.WithTxV(ctx, l.pool, func(tx pgx.Tx) (gl.Rule, error) {
		q := l.queries.WithTx(tx)
		now, err := lockRules(ctx, q)
		if err != nil {
			return gl.Rule{}, err
		}
		row, err := q.GetPostingRule(ctx, gldb.GetPostingRuleParams{EventType: key.EventType, Kind: key.Kind, Currency: key.Currency, EffectiveFrom: key.EffectiveFrom})
		switch err := interpretError(err); {
		case errors.Is(err, errNoRow):
			return gl.Rule{}, problem.Newf(ErrRuleNotFound, "no rule for %s kind %s%s from %s (gl rules list)",
				key.EventType, key.Kind, inCurrency(key.Currency), key.EffectiveFrom.UTC().Format(time.RFC3339Nano))
		case err != nil:
			return gl.Rule{}, fmt.Errorf("read rule %s: %w", key.Key(), err)
		}
		r := gl.Rule{
			EventType: row.EventType, Kind: row.Kind, Currency: row.Currency, EffectiveFrom: fromStart(row.EffectiveFrom),
			PostingRule: gl.PostingRule{DebitAccount: row.DebitAccount, CreditAccount: row.CreditAccount}, CreatedAt: row.CreatedAt,
		}
		if err := checkNotInEffect(ctx, q, r, now); err != nil {
			return gl.Rule{}, err
		}
		_, err = q.DeletePostingRule(ctx, gldb.DeletePostingRuleParams{EventType: r.EventType, Kind: r.Kind, Currency: r.Currency, EffectiveFrom: row.EffectiveFrom})
		switch err := interpretError(err); {
		case isRestrictViolation(err): // the guard saw it take effect meanwhile
			return gl.Rule{}, problem.Newf(ErrRuleInEffect, "rule %s took effect: it stays", r.Key())
		case err != nil:
			return gl.Rule{}, fmt.Errorf("withdraw rule %s: %w", r.Key(), err)
		}
		if err := l.record(ctx, tx, "rule.withdraw", r.Key(), ruleDetail(r)); err != nil {
			return gl.Rule{}, err
		}
		return r, nil
	})
}

// checkNotInEffect refuses to withdraw r once it is in effect: from its effective_from on, or
// once an entry was posted under it.
func checkNotInEffect(ctx context.Context, q *gldb.Queries, r gl.Rule, now time.Time) error {
	if !r.EffectiveFrom.After(now) {
		return problem.Newf(ErrRuleInEffect, "rule %s is in effect since %s: it stays; set a new rule from a later time instead",
			r.Key(), effectiveFrom(r.EffectiveFrom))
	}
	latest, err := latestPosted(ctx, q, r)
	if err != nil {
		return err
	}
	if !latest.Before(r.EffectiveFrom) {
		return problem.Newf(ErrRuleInEffect, "rule %s posted an entry already (an event of %s): it stays",
			r.Key(), latest.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// lockRules takes the rules lock exclusively and reads the database's time after it.
func lockRules(ctx context.Context, q *gldb.Queries) (time.Time, error) {
	if err := q.LockPostingRulesExclusive(ctx, postingRulesLock); err != nil {
		return time.Time{}, fmt.Errorf("lock posting rules: %w", interpretError(err))
	}
	now, err := q.StatementNow(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the time: %w", interpretError(err))
	}
	return now, nil
}

// latestPosted is the time of the latest entry posted under r's event type and kind, in r's
// currency (any currency for an any-currency rule).
func latestPosted(ctx context.Context, q *gldb.Queries, r gl.Rule) (time.Time, error) {
	latest, err := q.LatestOccurredAt(ctx, gldb.LatestOccurredAtParams{EventType: r.EventType, Kind: r.Kind, Currency: r.Currency})
	if err != nil {
		return time.Time{}, fmt.Errorf("find the latest entry of %s/%s: %w", r.EventType, r.Kind, interpretError(err))
	}
	return latest, nil
}

// ruleDetail is a rule as the audit trail records it.
func ruleDetail(r gl.Rule) map[string]string {
	return map[string]string{
		"event_type": r.EventType, "kind": r.Kind, "currency": r.Currency, "effective_from": effectiveFrom(r.EffectiveFrom),
		"debit_account": r.DebitAccount, "credit_account": r.CreditAccount,
	}
}

func effectiveFrom(t time.Time) string {
	if t.IsZero() {
		return "-infinity"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// inCurrency is " in EUR" for a currency's rule, "" for the any-currency rule.
func inCurrency(currency string) string {
	if currency == "" {
		return ""
	}
	return " in " + currency
}

// CopyRules writes rules (another GL's, for gl replay) into this ledger's table; a rule it
// holds already (its seed) stays.
func (l *Ledger) CopyRules(ctx context.Context, rules gl.Rules) error {
	for _, r := range rules.All() {
		err := l.queries.CopyPostingRule(ctx, gldb.CopyPostingRuleParams{
			EventType: r.EventType, Kind: r.Kind, Currency: r.Currency, EffectiveFrom: r.EffectiveFrom,
			DebitAccount: r.DebitAccount, CreditAccount: r.CreditAccount, CreatedAt: r.CreatedAt,
		})
		if err != nil {
			return fmt.Errorf("copy rule %s/%s from %s: %w", r.EventType, r.Kind, r.EffectiveFrom, interpretError(err))
		}
	}
	return nil
}
