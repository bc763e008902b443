package outbox

import (
	"errors"
	"fmt"
	"time"

	"walletgl/internal/config"
)

// Bind declares the relay's settings, with their defaults. EVENTS_BATCH_SIZE is the inbox
// consumer's batch too: the services give it to both.
func (c *RelayConfig) Bind(s *config.Set) {
	s.Duration(&c.PollInterval, "EVENTS_POLL_INTERVAL", "poll-interval", DefaultPollInterval, "relay fallback poll and catch-up interval (LISTEN/NOTIFY wakes it sooner)")
	s.Int(&c.CatchUpLimit, "EVENTS_CATCH_UP_LIMIT", "catch-up-limit", DefaultCatchUpLimit, "unacknowledged rows a catch-up round checks (and publishes again when the stream no longer holds their message)")
	s.Duration(&c.AckTimeout, "EVENTS_ACK_TIMEOUT", "ack-timeout", DefaultAckTimeout, "how often a dispatched row not yet acknowledged is checked: published again when the stream no longer holds its message, left for its consumer otherwise")
	s.Duration(&c.PublishTimeout, "EVENTS_PUBLISH_TIMEOUT", "publish-timeout", DefaultPublishTimeout, "how long the relay waits for the broker's PubAck of each message before it gives the row back")
	s.Int(&c.MaxAttempts, "EVENTS_MAX_ATTEMPTS", "max-attempts", DefaultMaxAttempts, "failed publishes before an outbox row becomes dead_letter")
	s.Duration(&c.Lease, "EVENTS_LEASE", "lease", DefaultLease, "how long a relay holds claimed rows before another relay may take them")
	s.Duration(&c.Retention, "EVENTS_RETENTION", "retention", DefaultRetention, "acknowledged outbox rows older than this are deleted")
	s.Int(&c.BatchSize, "EVENTS_BATCH_SIZE", "batch-size", DefaultBatchSize, "rows a relay claims, and events a consumer fetches and commits, per round")
	s.Int(&c.Workers, "EVENTS_RELAY_WORKERS", "relay-workers", DefaultRelayWorkers, "publish rounds a relay keeps in flight at once (claims and hand-offs each)")
	s.Bool(&c.PublishOnCommit, "EVENTS_PUBLISH_ON_COMMIT", "publish-on-commit", true, "write outbox rows claimed by this process's relay and publish them right after commit (false: every row waits for a NOTIFY and a claim)")
	s.Duration(&c.MarkDelay, "EVENTS_MARK_DELAY", "mark-delay", DefaultMarkDelay, "how long the wallet's relay leaves a row it published on commit dispatching, for the GL's acknowledgment to record the publish in the same update (0: mark it dispatched at once; at most half EVENTS_LEASE and EVENTS_ACK_TIMEOUT)")
}

// Validate reports every relay setting out of range.
func (c RelayConfig) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"EVENTS_POLL_INTERVAL": c.PollInterval, "EVENTS_ACK_TIMEOUT": c.AckTimeout, "EVENTS_LEASE": c.Lease,
		"EVENTS_RETENTION": c.Retention, "EVENTS_PUBLISH_TIMEOUT": c.PublishTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	for name, n := range map[string]int{
		"EVENTS_CATCH_UP_LIMIT": c.CatchUpLimit, "EVENTS_MAX_ATTEMPTS": c.MaxAttempts,
		"EVENTS_BATCH_SIZE": c.BatchSize, "EVENTS_RELAY_WORKERS": c.Workers,
	} {
		if n <= 0 {
			errs = append(errs, fmt.Errorf("%s must be at least 1, got %d", name, n))
		}
	}
	if limit := min(c.Lease, c.AckTimeout) / 2; c.MarkDelay < 0 || c.MarkDelay > limit {
		errs = append(errs, fmt.Errorf("EVENTS_MARK_DELAY must be between 0 and half of EVENTS_LEASE and EVENTS_ACK_TIMEOUT (%s), got %s", limit, c.MarkDelay))
	}
	return errors.Join(errs...)
}
