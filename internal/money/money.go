// Package money owns the currencies amounts are kept in and the way amounts are shown to
// people. Amounts stay int64 minor units everywhere (a GL total is a big integer of minor
// units); a currency is an ISO 4217 code known to golang.org/x/text/currency, and its number of
// minor units (CLDR's standard digits) says where the decimal point goes when an amount is
// rendered for a person: USD 500 is 5.00, JPY 500 is 500, BHD 500 is 0.500.
package money

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/text/currency"

	"walletgl/internal/problem"
)

// ErrInvalidCurrency is the application error of a currency code that is not an ISO 4217 code
// this service knows. Both services use it, for request fields and query parameters alike.
var ErrInvalidCurrency = problem.New(problem.Invalid, "invalid-currency",
	"the currency is not an ISO 4217 code such as USD")

// Currency is an ISO 4217 currency with the number of its minor units: 2 for USD (cents), 0
// for JPY, 3 for BHD.
type Currency struct {
	Code       string
	MinorUnits int
}

var codeSyntax = regexp.MustCompile(`^[A-Z]{3}$`)

// Parse returns the currency of an upper-case ISO 4217 code, or ErrInvalidCurrency naming the
// code (three letters that name no currency, such as ZZZ, included).
func Parse(code string) (Currency, error) {
	if !codeSyntax.MatchString(code) {
		return Currency{}, problem.Newf(ErrInvalidCurrency, "currency must be an upper-case ISO 4217 code such as USD, got %q", code)
	}
	unit, err := currency.ParseISO(code)
	if err != nil {
		return Currency{}, problem.Newf(ErrInvalidCurrency, "currency %q is not an ISO 4217 currency code", code)
	}
	digits, _ := currency.Standard.Rounding(unit)
	return Currency{Code: code, MinorUnits: digits}, nil
}

// Valid reports whether code is an upper-case ISO 4217 code (Parse succeeds).
func Valid(code string) bool {
	_, err := Parse(code)
	return err == nil
}

// Format renders amount, in minor units, in the currency's major units with its minor units
// after the point: USD 500 is "5.00", JPY 500 is "500", BHD -500 is "-0.500".
func (c Currency) Format(amount int64) string {
	return c.FormatDigits(strconv.FormatInt(amount, 10))
}

// FormatBig is Format for a total beyond int64.
func (c Currency) FormatBig(amount *big.Int) string { return c.FormatDigits(amount.String()) }

// FormatDigits is Format for an amount given as its decimal digits with an optional leading
// minus sign, as strconv and big.Int write them.
func (c Currency) FormatDigits(digits string) string {
	sign := ""
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	if c.MinorUnits <= 0 {
		return sign + digits
	}
	if len(digits) <= c.MinorUnits {
		digits = strings.Repeat("0", c.MinorUnits-len(digits)+1) + digits
	}
	cut := len(digits) - c.MinorUnits
	return sign + digits[:cut] + "." + digits[cut:]
}

// Format renders amount, in minor units of the currency code, for a person: in major units by
// the currency's minor units (Currency.Format). An amount in a code that is no currency (a row
// written around the services) is shown as its minor units with "minor units" after it, so it
// is never mistaken for major units.
func Format(amount int64, code string) string {
	return FormatDigits(strconv.FormatInt(amount, 10), code)
}

// FormatDigits is Format for an amount given as its decimal digits (a GL total).
func FormatDigits(digits, code string) string {
	c, err := Parse(code)
	if err != nil {
		return digits + " minor units"
	}
	return c.FormatDigits(digits)
}
