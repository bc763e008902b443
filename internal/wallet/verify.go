package wallet

import "time"

// Check is the result of one invariant check of `wallet verify`.
type Check struct {
	Name    string   `json:"name"`
	Unit    string   `json:"unit"`    // what was counted: transfers, outbox rows, wallets, currencies
	Checked int64    `json:"checked"` // how many Units were looked at
	Failed  int64    `json:"failed"`  // how many break the invariant
	Sample  []string `json:"sample"`  // the first offending ids, at most VerifySampleSize
}

// OK reports whether the invariant holds.
func (c Check) OK() bool { return c.Failed == 0 }

// VerifySampleSize bounds the offending ids a check reports.
const VerifySampleSize = 20

// VerifyOptions are what the checks need to know about the running system.
type VerifyOptions struct {
	// Retention is EVENTS_RETENTION: a transfer older than this may have lost its outbox row
	// to retention once it was acknowledged; a younger one may not.
	Retention time.Duration
}
