package gl_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/money"
)

func rule(eventType, kind string, from time.Time, debit, credit string) gl.Rule {
	return gl.Rule{EventType: eventType, Kind: kind, EffectiveFrom: from, PostingRule: gl.PostingRule{DebitAccount: debit, CreditAccount: credit}}
}

func withCurrency(r gl.Rule, currency string) gl.Rule {
	r.Currency = currency
	return r
}

func TestRulesAtPicksTheLatestRuleInForceAtTheEventsTime(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.AddDate(0, 1, 0)
	rules := gl.NewRules([]gl.Rule{ // out of order on purpose
		rule(contract.TypeTransferCompletedV2, contract.KindDeposit, t2, "1030", "2010"),
		rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "1010", "2010"),
		rule(contract.TypeTransferCompletedV2, contract.KindDeposit, t1, "1020", "2010"),
		rule(contract.TypeTransferCompletedV2, contract.KindWithdrawal, time.Time{}, "2010", "1010"),
	})
	for _, tc := range []struct {
		at    time.Time
		debit string
	}{
		{time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), "1010"},
		{t1.Add(-time.Nanosecond), "1010"},
		{t1, "1020"}, // effective_from is inclusive
		{t2.Add(-time.Nanosecond), "1020"},
		{t2, "1030"},
		{t2.AddDate(5, 0, 0), "1030"},
	} {
		r, ok := rules.At(contract.TypeTransferCompletedV2, contract.KindDeposit, "USD", tc.at)
		require.True(t, ok, tc.at)
		require.Equal(t, tc.debit, r.DebitAccount, "at %s", tc.at)
	}
	r, ok := rules.At(contract.TypeTransferCompletedV2, contract.KindWithdrawal, "USD", t1)
	require.True(t, ok)
	require.Equal(t, "2010", r.DebitAccount)
	_, ok = rules.At(contract.TypeTransferCompletedV2, contract.KindTransfer, "USD", t1)
	require.False(t, ok, "no rule of that kind")
	_, ok = rules.At(contract.TypeTransferCompleted, contract.KindDeposit, "USD", t1)
	require.False(t, ok, "the event type is part of the key")
}

func TestRulesAtPrefersTheRuleOfTheEventsCurrencyInForceThen(t *testing.T) {
	t.Parallel()
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	t2 := t1.AddDate(0, 1, 0)
	t3 := t2.AddDate(0, 1, 0)
	eur := func(from time.Time, debit string) gl.Rule {
		r := rule(contract.TypeTransferCompletedV2, contract.KindDeposit, from, debit, "2010")
		r.Currency = "EUR"
		return r
	}
	rules := gl.NewRules([]gl.Rule{
		rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "1010", "2010"),
		rule(contract.TypeTransferCompletedV2, contract.KindDeposit, t3, "1030", "2010"),
		eur(t2, "1020"),
	})
	for _, tc := range []struct {
		name     string
		currency string
		at       time.Time
		debit    string
	}{
		{"a euro event before its currency's rule takes the any-currency rule", "EUR", t1, "1010"},
		{"a euro event from its currency's rule on takes it", "EUR", t2, "1020"},
		{"a euro event keeps its currency's rule when the any-currency rule changes", "EUR", t3, "1020"},
		{"another currency takes the any-currency rule", "USD", t2, "1010"},
		{"another currency follows the any-currency rule's change", "USD", t3, "1030"},
		{"no currency asks for the any-currency rule alone", "", t2, "1010"},
	} {
		r, ok := rules.At(contract.TypeTransferCompletedV2, contract.KindDeposit, tc.currency, tc.at)
		require.True(t, ok, tc.name)
		require.Equal(t, tc.debit, r.DebitAccount, tc.name)
	}
	only := gl.NewRules([]gl.Rule{eur(t2, "1020")})
	_, ok := only.At(contract.TypeTransferCompletedV2, contract.KindDeposit, "USD", t3)
	require.False(t, ok, "a currency's rule never posts another currency")
}

func TestRuleValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rule gl.Rule
		ok   bool
	}{
		{"the v1 default", rule(contract.TypeTransferCompleted, contract.KindUnspecified, time.Time{}, "1010", "2010"), true},
		{"wallet to wallet on one account", rule(contract.TypeTransferCompletedV2, contract.KindTransfer, time.Time{}, "2010", "2010"), true},
		{"a hold's rule, fixed", rule(contract.TypeHoldPlaced, gl.KindHold, time.Time{}, "2010", "2020"), false},
		{"an unknown event type", rule("TransferCompleted.v9", contract.KindDeposit, time.Time{}, "1010", "2010"), false},
		{"a kind v1 never carries", rule(contract.TypeTransferCompleted, contract.KindDeposit, time.Time{}, "1010", "2010"), false},
		{"an unknown kind", rule(contract.TypeTransferCompletedV2, "gift", time.Time{}, "1010", "2010"), false},
		{"one account outside wallet to wallet", rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "1010", "1010"), false},
		{"a missing account", rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "", "2010"), false},
		{"a currency's rule", withCurrency(rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "1010", "2010"), "EUR"), true},
	} {
		err := tc.rule.Validate()
		if tc.ok {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, gl.ErrInvalidRule, tc.name)
	}
	// A currency is refused with the problem type of every unknown currency of the GL.
	for _, code := range []string{"eur", "ZZZ"} {
		err := withCurrency(rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "1010", "2010"), code).Validate()
		require.ErrorIs(t, err, money.ErrInvalidCurrency, "currency %q", code)
	}
}
