package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"walletgl/internal/metrics"
)

// The header's commit → posted figure is the p99 of the postings in its window, labelled with
// the window; a window without a posting says so and shows no figure of another span.
func TestTheLatencyIsAQuantileOfItsWindowAndSaysWhenItHasNoSample(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reading := func(at time.Duration, fast, slow uint64) metrics.Totals {
		return metrics.Totals{At: t0.Add(at), PostedCount: fast + slow, PostedSeconds: 1,
			PostedBuckets: []metrics.Bucket{{UpperBound: 0.1, Count: fast}, {UpperBound: 1, Count: fast + slow}}}
	}
	for _, tc := range []struct {
		name          string
		start, cur    metrics.Totals
		value, window string
	}{
		{"the first reading has nothing to compare", reading(0, 5, 0), reading(0, 5, 0), "—", "p99 over the last 5m0s: from the next reading on"},
		{"99 fast postings and one slow put the p99 at the fast bucket's bound", reading(0, 1000, 0), reading(5*time.Minute, 1099, 1), "100ms", "p99 over the last 5m0s"},
		{"a shorter window is named as it is", reading(0, 0, 0), reading(90*time.Second, 0, 10), "991ms", "p99 over the last 1m30s"},
		{"no posting in the window is said, never a mean since start", reading(0, 1000, 1000), reading(5*time.Minute, 1000, 1000), "—", "no posting in the last 5m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			value, window := latency(tc.cur, tc.start)
			require.Equal(t, tc.value, value)
			require.Equal(t, tc.window, window)
		})
	}
}

// The window's start is the newest reading at least latencyWindow old, one reading kept per
// rateWindow.
func TestTheLatencyWindowStartsAtMostItsSpanAgo(t *testing.T) {
	p := &pipeline{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for s := 0; s <= 600; s += 3 {
		start := p.windowStart(metrics.Totals{At: t0.Add(time.Duration(s) * time.Second)})
		over := time.Duration(s)*time.Second - start.At.Sub(t0)
		require.LessOrEqual(t, over, latencyWindow+rateWindow, "at %ds", s)
		if s >= 310 {
			require.GreaterOrEqual(t, over, latencyWindow, "at %ds", s)
		}
	}
	require.LessOrEqual(t, len(p.latencies), int(latencyWindow/rateWindow)+2, "the readings kept are bounded")
}
