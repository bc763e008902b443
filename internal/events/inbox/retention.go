package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/internal/loop"
)

// DefaultRetention is how long an inbox keeps the row of an event it processed after it
// last saw the event (EVENTS_INBOX_RETENTION): a day more than MinRetention of the
// defaults (events.DefaultStreamMaxAge + events.DefaultDuplicateWindow, outbox.DefaultRetention).
const DefaultRetention = 8 * 24 * time.Hour

// The inbox retention's pace: a round every inboxRetentionEvery (or every tenth of a shorter
// retention, so that the table stays within a tenth of its steady size) deletes what has
// expired, inboxDeleteBatch rows a statement with a pause between, so that each statement
// holds few row locks for a short time and the consumer's claims go on meanwhile.
const (
	inboxRetentionEvery = time.Minute
	inboxDeleteBatch    = 1000
	inboxDeletePause    = 50 * time.Millisecond
)

// MinRetention is the shortest inbox retention with which an inbox still recognises a
// late duplicate of an event it processed: a message is delivered again for as long as its
// stream holds it (streamMaxAge, and the duplicate window within which the broker takes a
// re-publish as the same message), and `wallet outbox republish` sends again the acknowledged
// rows the outbox still keeps (outboxRetention). A streamMaxAge of 0 or less (no age limit)
// has no such retention: MinRetention returns 0 and ok false.
func MinRetention(streamMaxAge, duplicateWindow, outboxRetention time.Duration) (min time.Duration, ok bool) {
	if streamMaxAge <= 0 {
		return 0, false
	}
	return max(streamMaxAge+max(duplicateWindow, 0), outboxRetention), true
}

// CheckRetention refuses an inbox retention shorter than MinRetention: the inbox would forget
// an event that can still come again. The producer's stream and outbox decide it, so both
// services take the same settings.
func CheckRetention(retention, streamMaxAge, duplicateWindow, outboxRetention time.Duration) error {
	floor, _ := MinRetention(streamMaxAge, duplicateWindow, outboxRetention)
	if retention <= 0 || retention >= floor {
		return nil
	}
	return fmt.Errorf("EVENTS_INBOX_RETENTION (%s) must be at least %s, the longer of EVENTS_STREAM_MAX_AGE + EVENTS_DUPLICATE_WINDOW (%s + %s) "+
		"and EVENTS_RETENTION (%s): a message is delivered again as long as the stream holds it, and wallet outbox republish sends "+
		"the outbox's acknowledged rows again; an inbox that forgot the event would not recognise the duplicate",
		retention, floor, streamMaxAge, duplicateWindow, outboxRetention)
}

// errStreamKeepsAll says the consumer's stream has no age limit: the inbox then keeps every
// row, since any message may still be delivered again.
var errStreamKeepsAll = errors.New("the stream has no max age, so any event may be delivered again: inbox rows are kept")

// retentionLoop deletes expired inbox rows every inboxRetentionEvery (a tenth of a shorter
// retention) until ctx is cancelled.
func (c *Consumer) retentionLoop(ctx context.Context) error {
	round := func(ctx context.Context) error {
		n, err := c.DeleteExpiredInbox(ctx)
		if n > 0 {
			c.log.Debug().Int64("rows", n).Msg("expired inbox rows deleted")
		}
		return err
	}
	every := max(min(inboxRetentionEvery, c.cfg.InboxRetention/10), time.Second)
	return loop.Every(ctx, every, round, func(err error, failures int) {
		c.logFailure(err, failures).Msg("inbox retention round failed")
	})
}

// DeleteExpiredInbox deletes the inbox rows of events this consumer processed (statuses
// processed and duplicate, never failed nor any other) that it has not seen for its retention,
// inboxDeleteBatch rows a statement with a short pause between, until none is left or ctx
// ends. The retention is the configured one (ConsumerConfig.InboxRetention), raised to
// MinRetention of the running stream when an operator raised the stream's max age above
// the configuration (events.Topology.EnsureStreams keeps such a limit): a late duplicate is still
// recognised. It reads the stream's configuration first; a stream it cannot read, or one
// without an age limit, deletes nothing. It returns how many rows it deleted.
func (c *Consumer) DeleteExpiredInbox(ctx context.Context) (int64, error) {
	keep, err := c.inboxRetention(ctx)
	if err != nil {
		return 0, err
	}
	before := time.Now().Add(-keep)
	q := eventsdb.New(c.pool)
	var deleted int64
	for {
		n, err := q.DeleteExpiredInbox(ctx, eventsdb.DeleteExpiredInboxParams{
			Consumer: c.cfg.Name, Before: before, BatchSize: inboxDeleteBatch,
		})
		deleted += n
		c.cfg.Metrics.InboxDeleted(n)
		switch {
		case err != nil:
			return deleted, fmt.Errorf("delete expired inbox rows of %s: %w", c.cfg.Name, interpretError(err))
		case n < inboxDeleteBatch:
			return deleted, nil
		case !loop.Sleep(ctx, inboxDeletePause):
			return deleted, nil
		}
	}
}

// inboxRetention is the retention a round applies: the configured one, or the running
// stream's MinRetention when that is longer.
func (c *Consumer) inboxRetention(ctx context.Context) (time.Duration, error) {
	name := c.topo.StreamName(c.cfg.Source)
	stream, err := c.js.Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("look up stream %s for the inbox retention: %w", name, err)
	}
	running := stream.CachedInfo().Config
	floor, limited := MinRetention(running.MaxAge, running.Duplicates, 0)
	if !limited {
		return 0, fmt.Errorf("stream %s: %w", name, errStreamKeepsAll)
	}
	return max(c.cfg.InboxRetention, floor), nil
}
