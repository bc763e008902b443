package gl

import "math/big"

// Sum is a total of line amounts in minor units: a balance, a trial-balance total, a running
// balance. A line's amount is an int64, but an account's lines are append-only and unbounded in
// number, so their totals can leave int64; a Sum cannot overflow, and a report over lines the
// ledger accepted never fails on its own arithmetic.
//
// The zero value is 0. A Sum is never changed once made, so copies share nothing mutable.
type Sum struct {
	i *big.Int // nil for zero, and never modified: equal sums are also deeply equal
}

// SumOf returns n as a Sum.
func SumOf(n int64) Sum { return sum(big.NewInt(n)) }

// NewSum returns i as a Sum; i is copied, so the caller may keep changing it.
func NewSum(i *big.Int) Sum {
	if i == nil {
		return Sum{}
	}
	return sum(new(big.Int).Set(i))
}

// sum wraps a big.Int that nothing else holds.
func sum(i *big.Int) Sum {
	if i.Sign() == 0 {
		return Sum{}
	}
	return Sum{i: i}
}

func (s Sum) big() *big.Int {
	if s.i == nil {
		return new(big.Int)
	}
	return s.i
}

// Add returns s + t.
func (s Sum) Add(t Sum) Sum { return sum(new(big.Int).Add(s.big(), t.big())) }

// Sub returns s − t.
func (s Sum) Sub(t Sum) Sum { return sum(new(big.Int).Sub(s.big(), t.big())) }

// Cmp compares s and t: -1, 0 or +1 as s is less than, equal to or greater than t.
func (s Sum) Cmp(t Sum) int { return s.big().Cmp(t.big()) }

// Sign is -1, 0 or +1 as s is negative, zero or positive.
func (s Sum) Sign() int { return s.big().Sign() }

// Equal reports whether s and t are the same amount.
func (s Sum) Equal(t Sum) bool { return s.Cmp(t) == 0 }

// Int64 returns s as an int64, and whether it fits.
func (s Sum) Int64() (int64, bool) { return s.big().Int64(), s.big().IsInt64() }

// Big returns s as a big.Int of the caller's own.
func (s Sum) Big() *big.Int { return new(big.Int).Set(s.big()) }

// String is the amount in decimal digits, like an int64's %d.
func (s Sum) String() string { return s.big().String() }

// MarshalJSON writes the amount as a JSON number with every digit: clients see the same shape
// as an int64, and a sum beyond int64 exactly (a decoder that reads numbers as float64 rounds
// it, as it would round any integer beyond 2^53).
func (s Sum) MarshalJSON() ([]byte, error) { return s.big().MarshalJSON() }
