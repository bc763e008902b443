package gl_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
)

func rule(eventType, kind string, from time.Time, debit, credit string) gl.Rule {
	return gl.Rule{EventType: eventType, Kind: kind, EffectiveFrom: from, PostingRule: gl.PostingRule{DebitAccount: debit, CreditAccount: credit}}
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
		r, ok := rules.At(contract.TypeTransferCompletedV2, contract.KindDeposit, tc.at)
		require.True(t, ok, tc.at)
		require.Equal(t, tc.debit, r.DebitAccount, "at %s", tc.at)
	}
	r, ok := rules.At(contract.TypeTransferCompletedV2, contract.KindWithdrawal, t1)
	require.True(t, ok)
	require.Equal(t, "2010", r.DebitAccount)
	_, ok = rules.At(contract.TypeTransferCompletedV2, contract.KindTransfer, t1)
	require.False(t, ok, "no rule of that kind")
	_, ok = rules.At(contract.TypeTransferCompleted, contract.KindDeposit, t1)
	require.False(t, ok, "the event type is part of the key")
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
	} {
		err := tc.rule.Validate()
		if tc.ok {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, gl.ErrInvalidRule, tc.name)
	}
}
