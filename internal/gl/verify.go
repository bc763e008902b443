package gl

import (
	"context"
	"time"
)

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
	// Verify checks every invariant; an entry's inbox row is looked for only when it was
	// posted within inboxRetention (0: every entry), since the inbox deletes older rows.
	Verify(ctx context.Context, inboxRetention time.Duration) ([]Check, error)
}
