package outbox

import (
	"fmt"
	"time"
)

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
	if age, stuck := r.rounds.Stalled(now); stuck {
		return fmt.Errorf("relay %s: a publish round has been in flight for %s", r.cfg.Source, age.Round(time.Second))
	}
	if ref := r.refusal.Load(); ref != nil && now.Sub(ref.since) > r.cfg.PublishTimeout {
		return fmt.Errorf("relay %s: the broker has refused publishes for %s: %w", r.cfg.Source, now.Sub(ref.since).Round(time.Second), ref.err)
	}
	return nil
}

// Unsigned reports a relay that publishes its events unsigned (EVENTS_INSECURE_UNSIGNED): a
// consumer that verifies refuses them.
func (r *Relay) Unsigned() error {
	if r.cfg.Signer == nil {
		return fmt.Errorf("relay %s publishes unsigned events", r.cfg.Source)
	}
	return nil
}
