package events

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// stallAfter is how long a round may be in flight before its loop is reported unhealthy:
// several of the timeouts that bound each of its waits, so only a round that can no longer
// end is reported, never a slow one.
func stallAfter(timeout time.Duration) time.Duration { return 4 * timeout }

// watchdog tracks the rounds of a service's loops that are in flight, so that a loop wedged
// in a round that never ends shows in health instead of silently holding its work.
type watchdog struct {
	limit   time.Duration
	mu      sync.Mutex
	next    uint64
	started map[uint64]time.Time
}

func newWatchdog(limit time.Duration) *watchdog {
	return &watchdog{limit: limit, started: map[uint64]time.Time{}}
}

// begin records a round in flight; the returned function ends it.
func (w *watchdog) begin() (end func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	token := w.next
	w.started[token] = time.Now()
	return func() {
		w.mu.Lock()
		delete(w.started, token)
		w.mu.Unlock()
	}
}

// stalled reports the age of the oldest round in flight when it is past the limit.
func (w *watchdog) stalled(now time.Time) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var oldest time.Duration
	for _, at := range w.started {
		oldest = max(oldest, now.Sub(at))
	}
	return oldest, oldest > w.limit
}

// brokerRefusal is the broker refusing a relay's publishes for reasons of its own.
type brokerRefusal struct {
	since time.Time
	err   error
}

// noteRefusal records the outcome of a publish round: the broker-wide refusal it met, or,
// once a round publishes anything, that the broker takes messages again.
func (r *Relay) noteRefusal(published int, err error) {
	switch {
	case published > 0 || err == nil:
		r.refusal.Store(nil)
	case r.refusal.Load() == nil:
		r.refusal.Store(&brokerRefusal{since: time.Now(), err: err})
	}
}

// Health reports why the relay cannot do its work now: a publish round in flight for far
// longer than its timeouts allow, or a broker that has refused its publishes for longer than
// a publish timeout (store full, no stream leader). Its rows wait in the outbox meanwhile.
func (r *Relay) Health() error {
	now := time.Now()
	if age, stuck := r.rounds.stalled(now); stuck {
		return fmt.Errorf("relay %s: a publish round has been in flight for %s", r.cfg.Source, age.Round(time.Second))
	}
	if ref := r.refusal.Load(); ref != nil && now.Sub(ref.since) > r.cfg.PublishTimeout {
		return fmt.Errorf("relay %s: the broker has refused publishes for %s: %w", r.cfg.Source, now.Sub(ref.since).Round(time.Second), ref.err)
	}
	return nil
}

// Signing reports what of the service's events goes unauthenticated: a relay that publishes
// unsigned, a consumer that accepts events unverified (EVENTS_INSECURE_UNSIGNED).
func Signing(r *Relay, c *Consumer) error {
	var errs []error
	if r.cfg.Signer == nil {
		errs = append(errs, fmt.Errorf("relay %s publishes unsigned events", r.cfg.Source))
	}
	if c.cfg.Trust.Insecure() {
		errs = append(errs, fmt.Errorf("consumer %s accepts events unverified", c.cfg.Name))
	}
	return errors.Join(errs...)
}
