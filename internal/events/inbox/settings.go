package inbox

import (
	"errors"
	"fmt"

	"walletgl/internal/config"
)

// Bind declares the consumer's settings, with their defaults. Its BatchSize is the relay's
// EVENTS_BATCH_SIZE (outbox.RelayConfig.Bind), which the services give to both.
func (c *ConsumerConfig) Bind(s *config.Set) {
	s.Int(&c.Workers, "EVENTS_CONSUMER_WORKERS", "consumer-workers", DefaultConsumerWorkers, "fetch-and-commit loops a consumer runs on its durable consumer; all but the first work only while a backlog waits")
	s.Duration(&c.InboxRetention, "EVENTS_INBOX_RETENTION", "inbox-retention", DefaultRetention, "inbox rows of processed events not seen for this long are deleted; at least EVENTS_STREAM_MAX_AGE + EVENTS_DUPLICATE_WINDOW and EVENTS_RETENTION, so that a late duplicate is still recognised")
}

// Validate reports every consumer setting out of range. How long the inbox must remember an
// event depends on the stream and the producer's outbox too: CheckRetention.
func (c ConsumerConfig) Validate() error {
	var errs []error
	if c.Workers <= 0 {
		errs = append(errs, fmt.Errorf("EVENTS_CONSUMER_WORKERS must be at least 1, got %d", c.Workers))
	}
	if c.InboxRetention <= 0 {
		errs = append(errs, fmt.Errorf("EVENTS_INBOX_RETENTION must be positive, got %s", c.InboxRetention))
	}
	return errors.Join(errs...)
}
