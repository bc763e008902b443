package gl

import (
	"fmt"
	"slices"
	"strings"

	"walletgl/internal/events/contract"
	"walletgl/internal/problem"
)

// Sides are the account types a rule of one kind may debit and credit.
type Sides struct {
	Debit  []AccountType
	Credit []AccountType
}

// RuleSides says, for each kind, which types of account a rule may post to, read from the
// types' normal balances. Every rule moves a customer's balance, owed by the platform: a
// liability (credit normal). A deposit credits it (what is owed grows) and debits what the
// money came from: an asset that grows (cash received) or an expense (money the platform
// gives). A withdrawal debits it (what is owed shrinks) and credits where the money went: an
// asset that shrinks (cash paid out) or revenue (money the platform keeps, a fee). A transfer
// and a hold move it between customers or to funds on hold, liability to liability. Equity is
// never a side: owners' capital is not a wallet's movement. A v1 event does not say its kind
// (unspecified), so its rule may take the sides of any of the three kinds it may be
// (UnspecifiedKinds).
var RuleSides = map[string]Sides{
	contract.KindDeposit:    {Debit: []AccountType{Asset, Expense}, Credit: []AccountType{Liability}},
	contract.KindTransfer:   {Debit: []AccountType{Liability}, Credit: []AccountType{Liability}},
	contract.KindWithdrawal: {Debit: []AccountType{Liability}, Credit: []AccountType{Asset, Revenue}},
	KindHold:                {Debit: []AccountType{Liability}, Credit: []AccountType{Liability}},
}

// UnspecifiedKinds are the kinds a movement of kind unspecified (a TransferCompleted.v1) may be.
var UnspecifiedKinds = []string{contract.KindDeposit, contract.KindTransfer, contract.KindWithdrawal}

// ErrRuleSides is an application error: a rule whose accounts' types make no sense for its kind.
var ErrRuleSides = problem.New(problem.Invalid, "rule-sides", "the posting rule's accounts are not of the types its kind posts to")

// CheckSides refuses a rule of kind that would debit debit or credit credit when their types
// are not those RuleSides allows, naming the account and its type.
func CheckSides(kind string, debit, credit Account) error {
	if kind == contract.KindUnspecified {
		for _, k := range UnspecifiedKinds {
			if sidesFit(RuleSides[k], debit, credit) {
				return nil
			}
		}
		return problem.Newf(ErrRuleSides, "kind %s (a deposit, a transfer or a withdrawal) may not debit account %s (%s) and credit account %s (%s): allowed %s",
			kind, debit.Code, debit.Type, credit.Code, credit.Type, unspecifiedSides())
	}
	sides, ok := RuleSides[kind]
	switch {
	case !ok:
		return problem.Newf(ErrRuleSides, "kind %q has no account types defined", kind)
	case !slices.Contains(sides.Debit, debit.Type):
		return problem.Newf(ErrRuleSides, "a %s may not debit account %s: it is %s; a %s debits %s",
			kind, debit.Code, withArticle(debit.Type), kind, typeList(sides.Debit))
	case !slices.Contains(sides.Credit, credit.Type):
		return problem.Newf(ErrRuleSides, "a %s may not credit account %s: it is %s; a %s credits %s",
			kind, credit.Code, withArticle(credit.Type), kind, typeList(sides.Credit))
	}
	return nil
}

func sidesFit(s Sides, debit, credit Account) bool {
	return slices.Contains(s.Debit, debit.Type) && slices.Contains(s.Credit, credit.Type)
}

func unspecifiedSides() string {
	parts := make([]string, 0, len(UnspecifiedKinds))
	for _, k := range UnspecifiedKinds {
		parts = append(parts, fmt.Sprintf("%s: debit %s, credit %s", k, typeList(RuleSides[k].Debit), typeList(RuleSides[k].Credit)))
	}
	return strings.Join(parts, "; ")
}

// typeList is "an asset account or an expense account".
func typeList(types []AccountType) string {
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = withArticle(t)
	}
	return strings.Join(parts, " or ")
}

func withArticle(t AccountType) string {
	if t == Asset || t == Equity || t == Expense {
		return "an " + string(t) + " account"
	}
	return "a " + string(t) + " account"
}
