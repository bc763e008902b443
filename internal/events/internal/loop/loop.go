// Package loop owns the pacing the relay's and the consumer's loops share: a round run every
// interval with its failures counted, a jittered backoff, a sleep that ends with its context,
// and the watchdog that reports a round that no longer ends.
package loop

import (
	"context"
	"math/rand/v2"
	"time"
)

// Every runs round each interval until ctx is cancelled. A failed round is retried at the
// next tick and reported to failed with the length of the streak, which logs its first round
// and every 50th at warn, the rest at debug (the loops' logFailure).
func Every(ctx context.Context, interval time.Duration, round func(context.Context) error, failed func(err error, failures int)) error {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		err := round(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			failures++
			failed(err, failures)
		default:
			failures = 0
		}
	}
}

// Backoff is an exponential delay with full jitter: attempt 1 waits up to base, doubling up to max.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + rand.N(d/2+1)
}

// Sleep waits d, or until ctx ends: false then.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
