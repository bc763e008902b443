package gl_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/gl"
)

func TestEntryBalanced(t *testing.T) {
	t.Parallel()
	line := func(code string, d gl.Direction, amount int64) gl.Line {
		return gl.Line{AccountCode: code, Direction: d, Amount: amount}
	}
	tests := []struct {
		name  string
		lines []gl.Line
		want  bool
	}{
		{"a debit and an equal credit balance", []gl.Line{line("1010", gl.Debit, 5), line("2010", gl.Credit, 5)}, true},
		{"split credits balance one debit", []gl.Line{line("1010", gl.Debit, 5), line("2010", gl.Credit, 2), line("2020", gl.Credit, 3)}, true},
		{"unequal sides do not balance", []gl.Line{line("1010", gl.Debit, 5), line("2010", gl.Credit, 4)}, false},
		{"no lines is not an entry", nil, false},
		{"debits alone do not balance", []gl.Line{line("1010", gl.Debit, 0), line("2010", gl.Debit, 0)}, false},
		{"a zero amount is refused", []gl.Line{line("1010", gl.Debit, 0), line("2010", gl.Credit, 0)}, false},
		{"a negative amount is refused", []gl.Line{line("1010", gl.Debit, -5), line("2010", gl.Credit, -5)}, false},
		{"an unknown direction is refused", []gl.Line{line("1010", "up", 5), line("2010", gl.Credit, 5)}, false},
		{"a line without account is refused", []gl.Line{line("", gl.Debit, 5), line("2010", gl.Credit, 5)}, false},
		{"an overflowing side is refused", []gl.Line{
			line("1010", gl.Debit, math.MaxInt64), line("1010", gl.Debit, 1),
			line("2010", gl.Credit, math.MaxInt64), line("2010", gl.Credit, 1),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, gl.Entry{Lines: tt.lines}.Balanced())
		})
	}
}

func TestNewTrialBalance(t *testing.T) {
	t.Parallel()

	t.Run("an empty ledger balances", func(t *testing.T) {
		t.Parallel()
		tb := gl.NewTrialBalance(nil)
		require.True(t, tb.Balanced)
		require.Empty(t, tb.Accounts)
		require.NotNil(t, tb.Accounts)
		require.Empty(t, tb.Currencies)
	})

	t.Run("totals are per currency and one unbalanced currency unbalances the ledger", func(t *testing.T) {
		t.Parallel()
		tb := gl.NewTrialBalance([]gl.AccountBalance{
			{AccountCode: "1010", Currency: "USD", Debits: gl.SumOf(7)},
			{AccountCode: "2010", Currency: "USD", Credits: gl.SumOf(7)},
			{AccountCode: "1010", Currency: "EUR", Debits: gl.SumOf(3)},
			{AccountCode: "2010", Currency: "EUR", Credits: gl.SumOf(2)},
		})
		require.Equal(t, []gl.CurrencyTotal{
			{Currency: "EUR", Debits: gl.SumOf(3), Credits: gl.SumOf(2), Balanced: false},
			{Currency: "USD", Debits: gl.SumOf(7), Credits: gl.SumOf(7), Balanced: true},
		}, tb.Currencies)
		require.False(t, tb.Balanced)
	})
}
