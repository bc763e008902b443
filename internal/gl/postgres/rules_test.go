package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
)

func TestPostingRuleCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	require.NoError(t, gl.DefaultPostingRule.Check(ctx, b.ledger))

	tests := []struct {
		name     string
		rule     gl.PostingRule
		notFound bool
	}{
		{"an unknown debit account fails", gl.PostingRule{DebitAccount: "9999", CreditAccount: "2010"}, true},
		{"an unknown credit account fails", gl.PostingRule{DebitAccount: "1010", CreditAccount: "nope"}, true},
		{"an empty account fails", gl.PostingRule{DebitAccount: "1010"}, false},
		{"the same account on both sides fails", gl.PostingRule{DebitAccount: "1010", CreditAccount: "1010"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.rule.Check(ctx, b.ledger)
			require.Error(t, err)
			if tt.notFound {
				require.ErrorIs(t, err, gl.ErrAccountNotFound)
			}
		})
	}
}

func TestHoldRulesCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	require.NoError(t, gl.DefaultHoldRules.Check(ctx, b.ledger))
	bad := gl.DefaultHoldRules
	bad.Place.CreditAccount = "2999"
	require.ErrorIs(t, bad.Check(ctx, b.ledger), gl.ErrAccountNotFound)
	bad = gl.DefaultHoldRules
	bad.Release = gl.PostingRule{DebitAccount: "2020", CreditAccount: "1010"}
	require.Error(t, bad.Check(ctx, b.ledger), "a release that does not undo the placement")
}

func TestVerifyFindsAnEntryOffItsRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// A deposit posted as a withdrawal: balanced, but not by its rule.
	wrong := gl.Entry{
		ID: uuid.New(), EventID: "ev-wrong", TransferID: "tr-wrong", Currency: "USD", OccurredAt: time.Now(),
		EventType: contract.TypeTransferCompletedV2, Kind: contract.KindDeposit, Lines: twoLines(5, "2010", "1010"),
	}
	_, err = b.ledger.Post(ctx, tx, wrong)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	c := ruleCheck(t, b)
	require.Equal(t, int64(1), c.Failures)
	require.Equal(t, []string{wrong.ID.String()}, c.Offenders)
}

func twoLines(amount int64, debit, credit string) []gl.Line {
	return []gl.Line{{AccountCode: debit, Direction: gl.Debit, Amount: amount, WalletID: "w-from"}, {AccountCode: credit, Direction: gl.Credit, Amount: amount, WalletID: "w-to"}}
}

// ruleCheck is gl verify's check of every entry against its posting rule. (The tests here post
// without the consumer's inbox, so verify's inbox checks do not apply.)
func ruleCheck(t *testing.T, b *testBundle) gl.Check {
	t.Helper()
	checks, err := b.ledger.Verify(context.Background(), 0)
	require.NoError(t, err)
	for _, c := range checks {
		if c.Name == "every entry's lines are those of the posting rule in force for its event type, kind and time" {
			return c
		}
	}
	t.Fatal("gl verify has no check of the posting rules")
	return gl.Check{}
}
