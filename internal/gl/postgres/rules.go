package postgres

import (
	"context"
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
			EventType: r.EventType, Kind: r.Kind, EffectiveFrom: fromStart(r.EffectiveFrom),
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
// posted under its event type and kind: it would say otherwise about posted entries.
var ErrRuleInPast = problem.New(problem.Invalid, "rule-in-past", "a posting rule may not take effect before now or before an entry already posted")

// SetRule adds r (gl rules set) after checking it: a known event type and kind, accounts in
// the chart, and an effective_from no earlier than the database's now nor than the latest
// entry posted under its type and kind. It holds the rules lock exclusively, so that no batch
// posts meanwhile under the rules it read before. The zero EffectiveFrom means now.
func (l *Ledger) SetRule(ctx context.Context, r gl.Rule) (gl.Rule, error) {
	if err := r.Validate(); err != nil {
		return gl.Rule{}, err
	}
	if err := r.CheckAccounts(ctx, l); err != nil {
		return gl.Rule{}, err
	}
	err := database.WithTx(ctx, l.pool, func(tx pgx.Tx) error {
		q := l.queries.WithTx(tx)
		if err := q.LockPostingRulesExclusive(ctx, postingRulesLock); err != nil {
			return fmt.Errorf("lock posting rules: %w", interpretError(err))
		}
		now, err := q.StatementNow(ctx)
		if err != nil {
			return fmt.Errorf("read the time: %w", interpretError(err))
		}
		if r.EffectiveFrom.IsZero() {
			r.EffectiveFrom = now
		}
		latest, err := q.LatestOccurredAt(ctx, gldb.LatestOccurredAtParams{EventType: r.EventType, Kind: r.Kind})
		if err != nil {
			return fmt.Errorf("find the latest entry of %s/%s: %w", r.EventType, r.Kind, interpretError(err))
		}
		switch {
		case r.EffectiveFrom.Before(now):
			return problem.Newf(ErrRuleInPast, "effective_from %s is before now (%s)", r.EffectiveFrom.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
		case r.EffectiveFrom.Before(latest) || r.EffectiveFrom.Equal(latest):
			return problem.Newf(ErrRuleInPast, "effective_from %s is not after the latest entry posted for %s kind %s (occurred %s)",
				r.EffectiveFrom.Format(time.RFC3339Nano), r.EventType, r.Kind, latest.Format(time.RFC3339Nano))
		}
		r.CreatedAt, err = q.InsertPostingRule(ctx, gldb.InsertPostingRuleParams{
			EventType: r.EventType, Kind: r.Kind, EffectiveFrom: r.EffectiveFrom,
			DebitAccount: r.DebitAccount, CreditAccount: r.CreditAccount,
		})
		if err != nil {
			return fmt.Errorf("insert rule %s/%s: %w", r.EventType, r.Kind, interpretError(err))
		}
		return nil
	})
	if err != nil {
		return gl.Rule{}, err
	}
	return r, nil
}

// CopyRules writes rules (another GL's, for gl replay) into this ledger's table; a rule it
// holds already (its seed) stays.
func (l *Ledger) CopyRules(ctx context.Context, rules gl.Rules) error {
	for _, r := range rules.All() {
		err := l.queries.CopyPostingRule(ctx, gldb.CopyPostingRuleParams{
			EventType: r.EventType, Kind: r.Kind, EffectiveFrom: r.EffectiveFrom,
			DebitAccount: r.DebitAccount, CreditAccount: r.CreditAccount, CreatedAt: r.CreatedAt,
		})
		if err != nil {
			return fmt.Errorf("copy rule %s/%s from %s: %w", r.EventType, r.Kind, r.EffectiveFrom, interpretError(err))
		}
	}
	return nil
}
