package gl_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/events/contract"
	"walletgl/internal/gl"
)

func TestCheckSidesRefusesAccountsWhoseTypesMakeNoSenseForTheKind(t *testing.T) {
	t.Parallel()
	cash := gl.Account{Code: "1010", Type: gl.Asset}
	owed := gl.Account{Code: "2010", Type: gl.Liability}
	held := gl.Account{Code: "2020", Type: gl.Liability}
	capital := gl.Account{Code: "3010", Type: gl.Equity}
	fees := gl.Account{Code: "4010", Type: gl.Revenue}
	promotions := gl.Account{Code: "5010", Type: gl.Expense}
	for _, tc := range []struct {
		name   string
		kind   string
		debit  gl.Account
		credit gl.Account
		want   string // "" when allowed; else a part of the refusal
	}{
		{"a deposit debits cash and credits what is owed", contract.KindDeposit, cash, owed, ""},
		{"a deposit may be paid by the platform, an expense", contract.KindDeposit, promotions, owed, ""},
		{"a deposit never debits revenue", contract.KindDeposit, fees, owed, "may not debit account 4010: it is a revenue account"},
		{"a deposit never debits what is owed", contract.KindDeposit, held, owed, "may not debit account 2020: it is a liability account"},
		{"a deposit never credits cash", contract.KindDeposit, cash, cash, "may not credit account 1010: it is an asset account"},
		{"a deposit never credits equity", contract.KindDeposit, cash, capital, "may not credit account 3010: it is an equity account"},
		{"a withdrawal debits what is owed and credits cash", contract.KindWithdrawal, owed, cash, ""},
		{"a withdrawal may credit revenue, a fee", contract.KindWithdrawal, owed, fees, ""},
		{"a withdrawal never debits revenue", contract.KindWithdrawal, fees, cash, "a withdrawal may not debit account 4010: it is a revenue account; a withdrawal debits a liability account"},
		{"a withdrawal never credits an expense", contract.KindWithdrawal, owed, promotions, "may not credit account 5010: it is an expense account"},
		{"a withdrawal never credits what is owed", contract.KindWithdrawal, owed, held, "may not credit account 2020"},
		{"a transfer stays among liabilities", contract.KindTransfer, owed, owed, ""},
		{"a transfer never debits cash", contract.KindTransfer, cash, owed, "may not debit account 1010"},
		{"a hold moves what is owed to funds on hold", gl.KindHold, owed, held, ""},
		{"a hold never credits revenue", gl.KindHold, owed, fees, "may not credit account 4010"},
		{"an unspecified movement may be a deposit", contract.KindUnspecified, cash, owed, ""},
		{"an unspecified movement may be a withdrawal", contract.KindUnspecified, owed, cash, ""},
		{"an unspecified movement may be a transfer", contract.KindUnspecified, owed, held, ""},
		{"an unspecified movement must move what is owed", contract.KindUnspecified, cash, fees, "may not debit account 1010 (asset) and credit account 4010 (revenue)"},
		{"an unknown kind has no sides", "gift", cash, owed, `kind "gift"`},
	} {
		err := gl.CheckSides(tc.kind, tc.debit, tc.credit)
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, gl.ErrRuleSides, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

func TestTheSeedRulesHaveSidesTheirKindsAllow(t *testing.T) {
	t.Parallel()
	types := map[string]gl.AccountType{"1010": gl.Asset, "2010": gl.Liability, "2020": gl.Liability}
	for _, r := range gl.DefaultRules().All() {
		debit := gl.Account{Code: r.DebitAccount, Type: types[r.DebitAccount]}
		credit := gl.Account{Code: r.CreditAccount, Type: types[r.CreditAccount]}
		require.NoError(t, gl.CheckSides(r.Kind, debit, credit), r.Key())
	}
}
