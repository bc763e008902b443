package gl

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"walletgl/internal/events/contract"
	"walletgl/internal/money"
	"walletgl/internal/problem"
)

// Rule is one row of the posting rules (db/schema/gl/00008_posting_rules.sql): from
// EffectiveFrom on, an event of EventType for a movement of Kind in Currency ("": any
// currency) debits its whole amount to DebitAccount and credits it to CreditAccount. A zero
// EffectiveFrom stands for -infinity (the seed rules, in force for every event).
type Rule struct {
	EventType     string
	Kind          string
	Currency      string // an ISO 4217 code, or "" for the rule of any currency
	EffectiveFrom time.Time
	PostingRule
	CreatedAt time.Time // when the row was written; set by the store
}

// KindHold is the one kind of the hold events' rules.
const KindHold = "hold"

// RuleKinds lists, for each event type the GL posts by rule, the kinds its events carry: a
// TransferCompleted.v1 is upcast with kind unspecified, a v2 names one of three kinds, a hold
// event is of kind hold. gl rules set refuses any other pair.
var RuleKinds = map[string][]string{
	contract.TypeTransferCompleted:   {contract.KindUnspecified},
	contract.TypeTransferCompletedV2: {contract.KindDeposit, contract.KindTransfer, contract.KindWithdrawal},
	contract.TypeHoldPlaced:          {KindHold},
	contract.TypeHoldCaptured:        {KindHold},
	contract.TypeHoldVoided:          {KindHold},
}

// ErrInvalidRule is an application error: a rule gl rules set must refuse.
var ErrInvalidRule = problem.New(problem.Invalid, "invalid-rule", "the posting rule is not valid")

// ValidateKey checks what names the rule without the database: a known event type and kind,
// and a currency that is an ISO 4217 code or none (any currency).
func (r Rule) ValidateKey() error {
	kinds, ok := RuleKinds[r.EventType]
	switch {
	case !ok:
		return problem.Newf(ErrInvalidRule, "event type %q is not posted by rule (known: %s)", r.EventType, ruleEventTypes())
	case !slices.Contains(kinds, r.Kind):
		return problem.Newf(ErrInvalidRule, "kind %q is not a kind of %s (known: %v)", r.Kind, r.EventType, kinds)
	case r.Currency != "" && !money.Valid(r.Currency):
		return problem.Newf(money.ErrInvalidCurrency, "currency %q is not an upper-case ISO 4217 currency code", r.Currency)
	}
	return nil
}

// Validate checks the rule's key and accounts without the database: a valid key
// (ValidateKey), not a hold's (those are fixed), both accounts named by valid codes, and
// different unless the kind is wallet-to-wallet (a movement between customers inside the
// liability account they share).
func (r Rule) Validate() error {
	if err := r.ValidateKey(); err != nil {
		return err
	}
	switch {
	case r.Kind == KindHold:
		return problem.Newf(ErrInvalidRule, "the hold rules are fixed (debit %s credit %s to place, the other way to release), so that account %s is the open holds' total",
			DefaultHoldRules.Place.DebitAccount, DefaultHoldRules.Place.CreditAccount, DefaultHoldRules.HoldAccount())
	case r.DebitAccount == "" || r.CreditAccount == "":
		return problem.Newf(ErrInvalidRule, "debit and credit accounts must both be set")
	case !accountCode.MatchString(r.DebitAccount):
		return problem.Newf(ErrInvalidRule, "debit account %q is not an account code (1 to 32 letters, digits, '.', '_' or '-')", r.DebitAccount)
	case !accountCode.MatchString(r.CreditAccount):
		return problem.Newf(ErrInvalidRule, "credit account %q is not an account code (1 to 32 letters, digits, '.', '_' or '-')", r.CreditAccount)
	case r.DebitAccount == r.CreditAccount && r.Kind != contract.KindTransfer:
		return problem.Newf(ErrInvalidRule, "debit and credit account are both %q; only kind %s may post to one account", r.DebitAccount, contract.KindTransfer)
	}
	return nil
}

// CheckAccounts verifies that both accounts are in the chart of accounts and of types the
// rule's kind may post to (CheckSides).
func (r Rule) CheckAccounts(ctx context.Context, accounts Accounts) error {
	sides := make([]Account, 2)
	for i, code := range []string{r.DebitAccount, r.CreditAccount} {
		a, err := accounts.Account(ctx, code)
		if err != nil {
			return fmt.Errorf("rule %s/%s account %q: %w", r.EventType, r.Kind, code, err)
		}
		sides[i] = a
	}
	return CheckSides(r.Kind, sides[0], sides[1])
}

// Key names the rule in messages and the audit trail: event type, kind, currency (any when
// none) and effective time.
func (r Rule) Key() string {
	currency := r.Currency
	if currency == "" {
		currency = "any"
	}
	from := "-infinity"
	if !r.EffectiveFrom.IsZero() {
		from = r.EffectiveFrom.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s/%s/%s@%s", r.EventType, r.Kind, currency, from)
}

func ruleEventTypes() []string {
	types := make([]string, 0, len(RuleKinds))
	for t := range RuleKinds {
		types = append(types, t)
	}
	sort.Strings(types)
	return types
}

// Rules is a set of posting rules, in order of event type, kind, currency and effective_from.
type Rules struct {
	rules []Rule
}

// NewRules orders rules for lookup.
func NewRules(rules []Rule) Rules {
	rules = slices.Clone(rules)
	sort.Slice(rules, func(i, j int) bool {
		a, b := rules[i], rules[j]
		if a.EventType != b.EventType {
			return a.EventType < b.EventType
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Currency != b.Currency {
			return a.Currency < b.Currency
		}
		return a.EffectiveFrom.Before(b.EffectiveFrom)
	})
	return Rules{rules: rules}
}

// All returns the rules in order.
func (rs Rules) All() []Rule { return slices.Clone(rs.rules) }

// At returns the rule in force for an event of eventType and kind in currency that happened at
// t: of the rules of its currency, the one with the latest EffectiveFrom at or before t; when
// none of its currency is in force then, the any-currency rule chosen the same way. found is
// false when no rule covers it. currency "" asks for the any-currency rule alone.
func (rs Rules) At(eventType, kind, currency string, t time.Time) (rule Rule, found bool) {
	if currency != "" {
		if rule, found = rs.at(eventType, kind, currency, t); found {
			return rule, true
		}
	}
	return rs.at(eventType, kind, "", t)
}

func (rs Rules) at(eventType, kind, currency string, t time.Time) (rule Rule, found bool) {
	for _, r := range rs.rules {
		if r.EventType == eventType && r.Kind == kind && r.Currency == currency && !r.EffectiveFrom.After(t) {
			rule, found = r, true // ordered by EffectiveFrom: the last match is the latest
		}
	}
	return rule, found
}

// ruleFor is the rule posting an event of eventType and kind in currency that happened at t;
// an event no rule covers can never be posted until one is set: permanent.
func ruleFor(rules Rules, eventID, eventType, kind, currency string, t time.Time) (Rule, error) {
	rule, ok := rules.At(eventType, kind, currency, t)
	if !ok {
		return Rule{}, contract.Permanent(fmt.Errorf("event %s: no posting rule for %s kind %s in %s at %s (gl rules list)", eventID, eventType, kind, currency, t.Format(time.RFC3339Nano)))
	}
	return rule, nil
}

// DefaultRules are the seed rules of GL migration 00008, in force from -infinity.
func DefaultRules() Rules {
	seed := func(eventType, kind, debit, credit string) Rule {
		return Rule{EventType: eventType, Kind: kind, PostingRule: PostingRule{DebitAccount: debit, CreditAccount: credit}}
	}
	return NewRules([]Rule{
		seed(contract.TypeTransferCompleted, contract.KindUnspecified, DefaultPostingRule.DebitAccount, DefaultPostingRule.CreditAccount),
		seed(contract.TypeTransferCompletedV2, contract.KindDeposit, "1010", "2010"),
		seed(contract.TypeTransferCompletedV2, contract.KindTransfer, "2010", "2010"),
		seed(contract.TypeTransferCompletedV2, contract.KindWithdrawal, "2010", "1010"),
		seed(contract.TypeHoldPlaced, KindHold, "2010", "2020"),
		seed(contract.TypeHoldCaptured, KindHold, "2020", "2010"),
		seed(contract.TypeHoldVoided, KindHold, "2020", "2010"),
	})
}
