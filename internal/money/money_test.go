package money_test

import (
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"walletgl/internal/money"
)

func TestParseKnowsISO4217AndItsMinorUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		code  string
		minor int
	}{
		{"the dollar has cents", "USD", 2},
		{"the euro has cents", "EUR", 2},
		{"the yen has no minor unit", "JPY", 0},
		{"the Bahraini dinar has three", "BHD", 3},
		{"the Chilean unit of account has four", "CLF", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := money.Parse(tc.code)
			require.NoError(t, err)
			require.Equal(t, money.Currency{Code: tc.code, MinorUnits: tc.minor}, c)
		})
	}
}

func TestParseRefusesWhatIsNoCurrency(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"ZZZ", "usd", "US", "USDX", "", "U$D"} {
		_, err := money.Parse(code)
		require.ErrorIs(t, err, money.ErrInvalidCurrency, "code %q", code)
		require.False(t, money.Valid(code), "code %q", code)
	}
}

func TestFormatPutsThePointByTheMinorUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		amount int64
		code   string
		want   string
	}{
		{"500 cents are five dollars", 500, "USD", "5.00"},
		{"500 yen are 500 yen", 500, "JPY", "500"},
		{"500 fils are half a dinar", 500, "BHD", "0.500"},
		{"one cent keeps its leading zeros", 1, "USD", "0.01"},
		{"zero has its decimals", 0, "USD", "0.00"},
		{"a debt keeps its sign", -1234, "USD", "-12.34"},
		{"a small debt keeps its sign", -5, "BHD", "-0.005"},
		{"an unknown code shows minor units", 500, "ZZZ", "500 minor units"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, money.Format(tc.amount, tc.code))
		})
	}
	usd, err := money.Parse("USD")
	require.NoError(t, err)
	big, ok := new(big.Int).SetString("-123456789012345678901234", 10)
	require.True(t, ok)
	require.Equal(t, "-1234567890123456789012.34", usd.FormatBig(big), "a total beyond int64")
}
