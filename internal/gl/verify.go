package gl

import "context"

// Check is the outcome of one of verify's checks on the live ledger.
type Check struct {
	Name      string   // what must hold, as a sentence
	Checked   int64    // how many things were looked at
	Failures  int64    // how many break the rule
	Offenders []string // ids of the first offenders (at most MaxOffenders)
}

// Passed reports whether nothing broke the rule.
func (c Check) Passed() bool { return c.Failures == 0 }

// MaxOffenders caps the ids a check lists; Failures still counts them all.
const MaxOffenders = 20

// Verifier runs the GL's invariant checks on the live database.
type Verifier interface {
	Verify(ctx context.Context) ([]Check, error)
}
