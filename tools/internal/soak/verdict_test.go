package soak

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// steady makes n windows of a system in its steady state: the same sizes and latencies in each,
// which change changes from the window it names on.
func steady(n int, change func(i int, w *Window)) []Window {
	ws := make([]Window, n)
	for i := range ws {
		ws[i] = Window{
			Index: i + 1, Seconds: float64(60 * (i + 1)),
			Streams: map[string]StreamSize{"wallet": {Bytes: 900 << 10, Msgs: 1400}, "gl": {Bytes: 800 << 10, Msgs: 1300}},
			Rows: map[string]int64{"wallet outbox": 1200, "wallet inbox": 2900, "gl outbox": 1200, "gl inbox": 2900,
				"gl balance_checkpoints": 12, "wallet audit_log": 1, "gl audit_log": 0},
			RSS:    map[string]float64{"wallet": 40, "gl": 45, "nats": 30},
			Posted: 1200, P50: 12, P99: 80,
		}
		if change != nil {
			change(i, &ws[i])
		}
	}
	return ws
}

func failedChecks(checks []Check) []string {
	var out []string
	for _, c := range checks {
		if !c.Passed {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return out
}

func TestJudge(t *testing.T) {
	t.Parallel()
	limits := DefaultLimits(10)
	for _, tc := range []struct {
		name   string
		change func(i int, w *Window)
		failed []string // the names of the checks that must fail (prefixes), none when empty
	}{
		{name: "a steady system passes"},
		{name: "a warm-up that fills the tables and the stream is left out", change: func(i int, w *Window) {
			if i < limits.Warmup {
				w.Rows["gl inbox"] /= 10
				w.Streams["wallet"] = StreamSize{Bytes: 1 << 10}
				w.P99 = 900
			}
		}},
		{name: "noise within the bounds passes", change: func(i int, w *Window) {
			w.Rows["wallet outbox"] += int64(100 * (i % 2))
			w.RSS["gl"] += float64(i % 3)
			if i%4 == 0 {
				w.P99 = 300 // an outage's window
			}
		}},
		{name: "an inbox that is never pruned fails", change: func(i int, w *Window) {
			w.Rows["gl inbox"] = int64(1200 * (i + 1))
		}, failed: []string{"table gl inbox bounded"}},
		{name: "checkpoints that pile up fail", change: func(i int, w *Window) {
			w.Rows["gl balance_checkpoints"] = int64(12 * 30 * (i + 1))
		}, failed: []string{"table gl balance_checkpoints bounded"}},
		{name: "a stream that keeps growing fails", change: func(i int, w *Window) {
			w.Streams["gl"] = StreamSize{Bytes: uint64(i+1) << 20}
		}, failed: []string{"stream gl bytes bounded"}},
		{name: "memory that leaks fails", change: func(i int, w *Window) {
			w.RSS["wallet"] = 40 + 5*float64(i)
		}, failed: []string{"RSS of wallet bounded"}},
		{name: "a stream the broker could not tell at the last window fails", change: func(i int, w *Window) {
			if i == 9 {
				delete(w.Streams, "wallet")
			}
		}, failed: []string{"stream wallet bounded"}},
		{name: "a p99 that grows fails", change: func(i int, w *Window) {
			w.P99 = 80 * float64(i+1)
		}, failed: []string{"commit→posted p99 does not grow"}},
		{name: "outages of another mix in each third pass: each is compared with its own kind", change: func(i int, w *Window) {
			kinds := []string{"pause gl-1", "kill -9 nats-1", "stop nats-1 gracefully"}
			p99 := map[string]float64{"pause gl-1": 20000, "kill -9 nats-1": 3900, "stop nats-1 gracefully": 2200}
			kind := kinds[i%3]
			if i >= 6 && kind == "stop nats-1 gracefully" {
				kind = "kill -9 nats-1" // the last third draws the slower restart more often
			}
			w.Faults, w.P99 = []string{kind}, p99[kind]
		}},
		{name: "a p99 that grows under the same outage fails", change: func(i int, w *Window) {
			w.Faults, w.P99 = []string{"pause gl-1"}, 20000
			if i%2 == 1 {
				w.Faults, w.P99 = []string{"stop nats-1 gracefully"}, 2200*float64(i)
			}
		}, failed: []string{"commit→posted p99 does not grow"}},
		{name: "posting that stalls fails: nothing posted while transfers wait", change: func(i int, w *Window) {
			if i >= 6 {
				w.Posted, w.P50, w.P99, w.Late = 0, math.NaN(), math.NaN(), 1000*(i-5)
				w.Rows["wallet outbox"] = int64(1200 * (i - 4))
			}
		}, failed: []string{"table wallet outbox bounded", "commit→posted p99 does not grow", "no transfer late or posted twice"}},
		{name: "a transfer posted twice fails", change: func(i int, w *Window) {
			if i == 9 {
				w.Doubled = 1
			}
		}, failed: []string{"no transfer late or posted twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := failedChecks(Judge(steady(10, tc.change), limits))
			require.Len(t, got, len(tc.failed), "%s", strings.Join(got, "\n"))
			for i, name := range tc.failed {
				require.True(t, strings.HasPrefix(got[i], name), "check %d: %s, want %s", i, got[i], name)
			}
		})
	}
}

func TestJudgeNeedsWindowsPastTheWarmup(t *testing.T) {
	t.Parallel()
	got := Judge(steady(3, nil), DefaultLimits(3))
	require.Len(t, got, 1)
	require.False(t, got[0].Passed)
	require.Contains(t, got[0].Detail, "at least 4 needed")
}

func TestAnHourOfTheDefaultLimitsStandsForWeeksOfProduction(t *testing.T) {
	t.Parallel()
	fs := Equivalence(DefaultScaled(), time.Hour)
	require.Len(t, fs, 4)
	least := Standing(fs)
	require.Equal(t, "stream bytes", least.Limit, "1 MiB of 1 GiB is the least scaled-down limit")
	require.InDelta(t, 1024.0/24, least.Days, 0.01, "an hour × 1024, in days")
	for _, f := range fs {
		require.GreaterOrEqual(t, f.Days, least.Days)
	}
	require.NoError(t, DefaultScaled().Validate())
	bad := DefaultScaled()
	bad.InboxRetention = bad.StreamMaxAge
	require.ErrorContains(t, bad.Validate(), "inbox retention")
}

func TestTheWarmupCoversTheLongestRetention(t *testing.T) {
	t.Parallel()
	full, short := Full(1), Short(1)
	require.NoError(t, full.Validate())
	require.NoError(t, short.Validate())
	require.Equal(t, 12, full.Warmup(), "a fifth of 60 windows is more than the 2.5 min inbox retention")
	require.Equal(t, 4, short.Warmup(), "the 80 s inbox retention takes 3 windows of 30 s, and one more")
	short.Duration = 2 * time.Minute
	require.ErrorContains(t, short.Validate(), "fewer than 2 after the warm-up of 4")
}
