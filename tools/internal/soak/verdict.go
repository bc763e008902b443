package soak

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Window is what the soak measured at the end of one window: sizes at that moment, and the
// transfers posted during it.
type Window struct {
	Index   int
	Seconds float64 // since the load started, at the window's end
	// Streams holds each stream's bytes and messages ("wallet", "gl"); a stream the broker
	// could not tell (it was down at that moment) is missing.
	Streams map[string]StreamSize
	// Rows counts the rows of each bounded table, named "<service> <table>".
	Rows map[string]int64
	// RSS is each process's resident set size in MiB ("wallet", "gl", "nats").
	RSS map[string]float64
	// Posted counts the transfers the GL posted during the window; P50 and P99 are their
	// commit→posted latencies in milliseconds (commit time in the wallet's database, posted
	// time in the GL's), NaN when none was posted.
	Posted   int
	P50, P99 float64
	// Late counts the transfers committed more than a window ago that the GL has not posted;
	// Doubled the transfers the GL posted more than once, so far.
	Late, Doubled int
	Faults        []string // the outages injected during the window
}

// StreamSize is a stream's size.
type StreamSize struct {
	Bytes, Msgs uint64
}

// Limits are the soak's pass criteria on its windows.
type Limits struct {
	// Warmup windows are left out of every comparison: the tables, the stream and the processes'
	// memory fill up to their steady size then.
	Warmup int
	// Growth bounds the last window's size against the first after the warm-up (1.2: 20 %
	// more at most), plus Slack, so that a tiny first figure is not held to a tiny last one.
	Growth float64
	Slack  Slack
	// P99Growth bounds the median p99 of the last third of the windows after the warm-up
	// against that of the first third.
	P99Growth float64
}

// Slack is the absolute headroom over Growth of each kind of figure.
type Slack struct {
	Rows     int64
	Bytes    uint64
	RSSMiB   float64
	P99Milli float64
}

// DefaultLimits are `make soak`'s: a warm-up of 20 % of the windows (2 at least), 1.2× growth,
// 1.5× p99.
func DefaultLimits(windows int) Limits {
	return Limits{
		Warmup: max(2, windows/5), Growth: 1.2, P99Growth: 1.5,
		Slack: Slack{Rows: 100, Bytes: 256 << 10, RSSMiB: 8, P99Milli: 50},
	}
}

// Check is one pass criterion and whether it held.
type Check struct {
	Name   string
	Passed bool
	Detail string
}

// Judge checks the windows against the limits: every table, both streams and every process's
// memory bounded, p99 not growing, and no transfer late or doubled at the end.
func Judge(ws []Window, l Limits) []Check {
	if len(ws) < l.Warmup+2 {
		return []Check{{Name: "enough windows to judge", Detail: fmt.Sprintf("%d windows, %d of them warm-up: at least %d needed", len(ws), l.Warmup, l.Warmup+2)}}
	}
	first, last := ws[l.Warmup], ws[len(ws)-1]
	var checks []Check
	bounded := func(kind, name string, a, b, slack float64, unit string) {
		limit := a*l.Growth + slack
		checks = append(checks, Check{
			Name:   fmt.Sprintf("%s %s bounded", kind, name),
			Passed: b <= limit,
			Detail: fmt.Sprintf("window %d %s%s, window %d %s%s (limit %s%s: %.1f× + %s)", first.Index, num(a), unit, last.Index, num(b), unit, num(limit), unit, l.Growth, num(slack)),
		})
	}
	for _, name := range keys(first.Streams, last.Streams) {
		a, okA := first.Streams[name]
		b, okB := last.Streams[name]
		if !okA || !okB {
			checks = append(checks, Check{Name: "stream " + name + " bounded", Detail: fmt.Sprintf("its size unknown in window %d or %d (the broker did not answer)", first.Index, last.Index)})
			continue
		}
		bounded("stream", name+" bytes", float64(a.Bytes), float64(b.Bytes), float64(l.Slack.Bytes), " B")
	}
	for _, name := range keys(first.Rows, last.Rows) {
		bounded("table", name, float64(first.Rows[name]), float64(last.Rows[name]), float64(l.Slack.Rows), " rows")
	}
	for _, name := range keys(first.RSS, last.RSS) {
		bounded("RSS of", name, first.RSS[name], last.RSS[name], l.Slack.RSSMiB, " MiB")
	}
	checks = append(checks, p99Check(ws[l.Warmup:], l))
	checks = append(checks, Check{
		Name:   "no transfer late or posted twice at the last window",
		Passed: last.Late == 0 && last.Doubled == 0,
		Detail: fmt.Sprintf("%d committed more than a window before and not posted, %d posted more than once", last.Late, last.Doubled),
	})
	return checks
}

// p99Check compares the p99 of the last third of ws with that of the first third, like with
// like: the windows of each outage (the same faults, or none) apart, since an outage decides
// its window's p99 (a GL paused for 20 s makes it 20 s, a broker restarted a few seconds), and
// the thirds need not hold the same mix of them. Of each kind it takes the median of the
// windows' p99 in each third (the lower median of an even number: p99 is noisy on two cores);
// every kind found in both thirds must stay within the limit. A window that posted nothing
// while transfers waited (Late > 0) counts as an infinite p99: the pipeline stalled.
func p99Check(ws []Window, l Limits) Check {
	third := max(len(ws)/3, 1)
	early, late := byOutage(ws[:third]), byOutage(ws[len(ws)-third:])
	check := Check{Name: "commit→posted p99 does not grow", Passed: true}
	var details []string
	for _, kind := range keys(early, late) {
		a, b := medianP99(early[kind]), medianP99(late[kind])
		if math.IsNaN(a) || math.IsNaN(b) {
			if math.IsInf(medianP99(late[kind]), 1) {
				check.Passed = false // stalled late, whatever came before
				details = append(details, fmt.Sprintf("%s: stalled in windows %d–%d", kind, ws[len(ws)-third].Index, ws[len(ws)-1].Index))
			}
			continue
		}
		limit := a*l.P99Growth + l.Slack.P99Milli
		passed := !math.IsInf(b, 1) && b <= limit
		check.Passed = check.Passed && passed
		details = append(details, fmt.Sprintf("%s: %s ms → %s ms (limit %s)", kind, num(a), num(b), num(limit)))
	}
	if len(details) == 0 {
		check.Passed = false
		details = append(details, "no kind of window in both thirds")
	}
	check.Detail = fmt.Sprintf("median p99 of windows %d–%d against %d–%d, by outage (limit %.1f× + %s ms): %s",
		ws[0].Index, ws[third-1].Index, ws[len(ws)-third].Index, ws[len(ws)-1].Index, l.P99Growth, num(l.Slack.P99Milli), strings.Join(details, "; "))
	return check
}

// byOutage groups windows by the outages injected in them ("none" for a window without).
func byOutage(ws []Window) map[string][]Window {
	groups := map[string][]Window{}
	for _, w := range ws {
		kind := "none"
		if len(w.Faults) > 0 {
			kind = strings.Join(w.Faults, "; ")
		}
		groups[kind] = append(groups[kind], w)
	}
	return groups
}

func medianP99(ws []Window) float64 {
	var v []float64
	for _, w := range ws {
		switch {
		case w.Posted > 0:
			v = append(v, w.P99)
		case w.Late > 0:
			v = append(v, math.Inf(1))
		}
	}
	if len(v) == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	return v[(len(v)-1)/2] // the lower median
}

func keys[V any](a, b map[string]V) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "∞"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
	}
}
