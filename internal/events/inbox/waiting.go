package inbox

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"walletgl/internal/events/contract"
	"walletgl/internal/tracing"
)

// How often the consumer looks at its waiting events without being woken: it counts them
// (the metric's figures) every waitingCountInterval and, when any wait, retries them all every
// waitingRetryInterval. A commit of what they wait for wakes it at once (Satisfier); the
// tick covers the rest (an original posted by an operator's retry, or by a handler that is no
// Satisfier).
const (
	waitingCountInterval = 5 * time.Second
	waitingRetryInterval = 30 * time.Second
)

// waiters collects the keys (contract.WaitTransfer, contract.WaitHold) whose waiting events are to
// be retried, and wakes the loop that retries them.
type waiters struct {
	mu   sync.Mutex
	keys map[string]struct{}
	wake chan struct{}
}

func newWaiters() *waiters {
	return &waiters{keys: map[string]struct{}{}, wake: make(chan struct{}, 1)}
}

// add queues keys and wakes the loop.
func (w *waiters) add(keys ...string) {
	if len(keys) == 0 {
		return
	}
	w.mu.Lock()
	for _, k := range keys {
		w.keys[k] = struct{}{}
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take returns the queued keys and forgets them.
func (w *waiters) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, 0, len(w.keys))
	for k := range w.keys {
		keys = append(keys, k)
	}
	clear(w.keys)
	slices.Sort(keys)
	return keys
}

// park records a delivery that waits for another event in the inbox (waiting, with its
// verified payload and what it waits for) and acknowledges it: it no longer holds an
// ack-pending slot of the broker, nor is it redelivered. If the record cannot be written, the
// message is left to be redelivered.
func (c *Consumer) park(ctx context.Context, d delivery, cause error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeepingTimeout)
	defer cancel()
	key := contract.WaitsFor(cause)
	if key == "" {
		key = "unknown"
	}
	w := Waiting{WaitsFor: key, Cause: cause, Payload: d.msg.Data(), Attempts: int32(d.delivered)}
	if err := c.inbox.RecordWaiting(ctx, c.pool, d.Inbound, w); err != nil {
		tracing.LogTraceID(c.log.Error(), d.traceID).Err(err).Str("event_id", d.EventID).Msg("park waiting event; leaving it for redelivery")
		c.retry(d, nil)
		return
	}
	c.failing.forget(d.EventID)
	c.waited.Add(1)
	c.waiting.Add(1)
	tracing.LogTraceID(c.log.Info(), d.traceID).Err(cause).Str("event_id", d.EventID).Str("waits_for", key).
		Uint64("stream_seq", d.StreamSeq).Msg("event parked in the inbox until what it waits for posts")
	if err := d.msg.Ack(); err != nil {
		tracing.LogTraceID(c.log.Debug(), d.traceID).Err(err).Str("event_id", d.EventID).Msg("ack not sent")
	}
	endConsume(d, contract.StatusWaiting, cause)
	// What it waits for may have committed between its attempt and its parking.
	c.waiters.add(key)
}

// satisfied queues what the committed fresh deliveries let waiting events go on with, when
// any event waits and the handler says (Satisfier).
func (c *Consumer) satisfied(ds []delivery, fresh []bool) {
	s, ok := c.inbox.handler.(Satisfier)
	if !ok || c.waiting.Load() == 0 {
		return
	}
	var keys []string
	for i, d := range ds {
		if fresh[i] {
			keys = append(keys, s.Satisfies(d.Env)...)
		}
	}
	c.waiters.add(keys...)
}

// retryWaiting applies waiting events once what they wait for posts, until ctx is cancelled:
// those waiting for the keys queued by commits at once, and every waiting event on a slow
// tick (ticking: the live loop; a replay wakes it by commits alone and ends with a pass of
// its own).
func (c *Consumer) retryWaiting(ctx context.Context, ticking bool) {
	var count, retry <-chan time.Time
	if ticking {
		countTick, retryTick := time.NewTicker(waitingCountInterval), time.NewTicker(waitingRetryInterval)
		defer countTick.Stop()
		defer retryTick.Stop()
		count, retry = countTick.C, retryTick.C
		c.countWaiting(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.waiters.wake:
			if keys := c.waiters.take(); len(keys) > 0 {
				c.applyWaiting(ctx, keys)
			}
		case <-count:
			c.countWaiting(ctx)
		case <-retry:
			if c.waiting.Load() > 0 {
				c.applyWaiting(ctx, nil)
				c.countWaiting(ctx)
			}
		}
	}
}

// countWaiting counts the waiting events for the metrics and for satisfied.
func (c *Consumer) countWaiting(ctx context.Context) {
	s, err := c.inbox.Waiting(ctx, c.pool)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn().Err(err).Msg("count waiting events")
		}
		return
	}
	c.waiting.Store(s.Count)
	age := time.Duration(0)
	if s.Count > 0 {
		age = time.Since(s.Oldest)
	}
	c.cfg.Metrics.Waiting(s.Count, age)
}

// applyWaiting tries the events waiting for keys (none: every waiting event), each in a
// transaction of its own; one that still waits stays waiting. A cancelled ctx stops it between
// two events.
func (c *Consumer) applyWaiting(ctx context.Context, keys []string) {
	ids, err := c.inbox.WaitingFor(ctx, c.pool, keys)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn().Err(err).Msg("find waiting events")
		}
		return
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		// Not cancelled half-way: a transaction cut off may still hold the row's lock when the
		// next pass (a replay's last) comes, which would skip it.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.AckWait)
		applied, err := c.inbox.ApplyWaiting(actx, c.pool, id)
		cancel()
		switch {
		case errors.Is(err, contract.ErrMalformed) || errors.Is(err, contract.ErrConflict):
			c.failed.Add(1)
			c.waiting.Add(-1)
			c.cfg.Metrics.Failed(contract.FailureReason(err))
			c.log.Error().Err(err).Str("inbox_id", id).Msg("waiting event recorded failed")
		case err != nil:
			c.log.Warn().Err(err).Str("inbox_id", id).Msg("apply waiting event; it stays waiting")
		case applied:
			c.released.Add(1)
			c.waiting.Add(-1)
			c.cfg.Metrics.Released()
			c.log.Info().Str("inbox_id", id).Msg("waiting event applied")
		}
	}
}
