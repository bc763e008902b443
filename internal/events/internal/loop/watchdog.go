package loop

import (
	"sync"
	"time"
)

// StallAfter is how long a round may be in flight before its loop is reported unhealthy:
// several of the timeouts that bound each of its waits, so only a round that can no longer
// end is reported, never a slow one.
func StallAfter(timeout time.Duration) time.Duration { return 4 * timeout }

// Watchdog tracks the rounds of a service's loops that are in flight, so that a loop wedged
// in a round that never ends shows in health instead of silently holding its work.
type Watchdog struct {
	limit   time.Duration
	mu      sync.Mutex
	next    uint64
	started map[uint64]time.Time
}

// NewWatchdog returns a watchdog that reports a round in flight for longer than limit.
func NewWatchdog(limit time.Duration) *Watchdog {
	return &Watchdog{limit: limit, started: map[uint64]time.Time{}}
}

// Begin records a round in flight; the returned function ends it.
func (w *Watchdog) Begin() (end func()) {
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

// Stalled reports the age of the oldest round in flight when it is past the limit.
func (w *Watchdog) Stalled(now time.Time) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var oldest time.Duration
	for _, at := range w.started {
		oldest = max(oldest, now.Sub(at))
	}
	return oldest, oldest > w.limit
}
