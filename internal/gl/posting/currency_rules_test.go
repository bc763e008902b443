package posting_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
	"walletgl/internal/gl/posting"
)

// inCurrency is env with its transfer's currency replaced.
func inCurrency(t *testing.T, env contract.Envelope, currency string) contract.Envelope {
	t.Helper()
	var data map[string]any
	require.NoError(t, json.Unmarshal(env.Data, &data))
	data["currency"] = currency
	raw, err := json.Marshal(data)
	require.NoError(t, err)
	env.Data = raw
	return env
}

func TestAnEventIsPostedByTheRuleOfItsCurrencyElseTheAnyCurrencyRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	h := posting.New(b.ledger, zerolog.Nop())
	_, err := b.ledger.AddAccount(ctx, gl.Account{Code: "1020", Name: "Cash at the euro bank", Type: gl.Asset, NormalBalance: gl.Debit})
	require.NoError(t, err)

	eur := rule(contract.TypeTransferCompletedV2, contract.KindDeposit, time.Time{}, "1020", "2010")
	eur.Currency = "EUR"
	set, err := b.ledger.SetRule(ctx, eur)
	require.NoError(t, err)
	require.Equal(t, "EUR", set.Currency)

	at := set.EffectiveFrom.Add(time.Second)
	euros, dollars, before := newTransferID(), newTransferID(), newTransferID()
	require.NoError(t, b.handle(t, h, inCurrency(t, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindDeposit, euros, 70, at), "EUR")))
	require.NoError(t, b.handle(t, h, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindDeposit, dollars, 80, at)))
	require.NoError(t, b.handle(t, h, inCurrency(t, transferEvent(t, contract.TypeTransferCompletedV2, contract.KindDeposit, before, 90, set.EffectiveFrom.Add(-time.Millisecond)), "EUR")))

	require.Equal(t, twoLines(70, "1020", "2010"), linesOf(t, b, euros).Lines, "the euro rule posts euros")
	require.Equal(t, twoLines(80, "1010", "2010"), linesOf(t, b, dollars).Lines, "dollars fall back to the any-currency rule")
	require.Equal(t, twoLines(90, "1010", "2010"), linesOf(t, b, before).Lines, "before the euro rule, euros too")

	c := ruleCheck(t, b)
	require.True(t, c.Passed(), "gl verify picks each entry's rule by its currency: %v", c.Offenders)
	require.Equal(t, int64(3), c.Checked)
}
