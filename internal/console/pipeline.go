package console

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"walletgl/internal/metrics"
)

// rateWindow is the shortest span the header's rates are measured over.
const rateWindow = 5 * time.Second

// pipeline turns the service's metrics (metrics.Totals, what a scrape reads) into the header's
// numbers: rates between two readings, the latest gauges.
type pipeline struct {
	metrics *metrics.Metrics
	remote  func(ctx context.Context) (metrics.Totals, error)

	mu           sync.Mutex
	older, newer metrics.Totals // readings at least rateWindow apart, for the rates
	remoteLast   metrics.Totals
	latencies    []metrics.Totals // readings of the latency's source over the last latencyWindow, oldest first
}

// pipelineView is the header as shown.
type pipelineView struct {
	Published  string // events this service's relay had the broker store, per second
	Processed  string // events this service's consumer applied, per second
	Latency    string // commit → posted, latencyQuantile over the window
	LatencyFor string // what the latency covers, shown beside it: "p99 over the last 5m0s"
	Pending    string // messages the consumer has not been delivered yet
	Oldest     string // the oldest unacknowledged outbox row's age
	OldestAge  time.Duration
	Stale      bool // the metrics could not be read
	At         string
	Health     *healthView // the rows that need a look; nil for a key that may not see them
	remote     *remoteReading
}

// remoteReading is a reading of the other service's metrics, or why there is none.
type remoteReading struct {
	totals metrics.Totals
	err    error
}

func newPipeline(m *metrics.Metrics, remote func(context.Context) (metrics.Totals, error)) *pipeline {
	return &pipeline{metrics: m, remote: remote}
}

// read takes a reading and returns the header.
func (p *pipeline) read(ctx context.Context) pipelineView {
	if p.metrics == nil {
		return pipelineView{Stale: true}
	}
	cur, err := p.metrics.Totals()
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("console: read the metrics")
		return pipelineView{Stale: true}
	}
	older := p.advance(&p.older, &p.newer, cur)
	v := pipelineView{
		Published: perSecond(cur.Published-older.Published, cur.At.Sub(older.At)),
		Processed: perSecond(cur.Processed-older.Processed, cur.At.Sub(older.At)),
		Pending:   fmt.Sprintf("%.0f", cur.Pending),
		Oldest:    formatAge(cur.OldestUnacked),
		OldestAge: cur.OldestUnacked,
		At:        cur.At.UTC().Format("15:04:05Z"),
	}
	latencySource := cur
	if p.remote != nil {
		remote, err := p.readRemote(ctx)
		v.remote = &remoteReading{totals: remote, err: err}
		if err != nil {
			zerolog.Ctx(ctx).Debug().Err(err).Msg("console: read the other service's metrics")
			v.Latency, v.LatencyFor = "—", "the GL's metrics cannot be read with GL_API_KEY (needs metrics:read)"
			return v
		}
		latencySource = remote
	}
	v.Latency, v.LatencyFor = latency(latencySource, p.windowStart(latencySource))
	return v
}

// latencyWindow is the span the header's commit → posted quantile covers, and latencyQuantile
// the quantile.
const (
	latencyWindow   = 5 * time.Minute
	latencyQuantile = 0.99
)

// windowStart records cur among the latency's readings (one per rateWindow at most, none older
// than latencyWindow) and returns the oldest: the window's start (cur itself at the first).
func (p *pipeline) windowStart(cur metrics.Totals) metrics.Totals {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.latencies); n == 0 || cur.At.Sub(p.latencies[n-1].At) >= rateWindow {
		p.latencies = append(p.latencies, cur)
	}
	// Keep the newest reading at least latencyWindow old as the start, drop the ones before it.
	for len(p.latencies) > 1 && cur.At.Sub(p.latencies[1].At) >= latencyWindow {
		p.latencies = p.latencies[1:]
	}
	return p.latencies[0]
}

// advance records cur and returns the reading to measure rates from: the older of two kept at
// least rateWindow apart (cur itself at the first reading).
func (p *pipeline) advance(older, newer *metrics.Totals, cur metrics.Totals) metrics.Totals {
	p.mu.Lock()
	defer p.mu.Unlock()
	if older.At.IsZero() {
		*older, *newer = cur, cur
		return cur
	}
	if cur.At.Sub(newer.At) >= rateWindow {
		*older, *newer = *newer, cur
	}
	return *older
}

func perSecond(delta float64, over time.Duration) string {
	if over <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f/s", delta/over.Seconds())
}

// latency is the latencyQuantile of the commit → posted times of the postings between start
// and cur (the histogram's buckets, interpolated within a bucket as Prometheus's
// histogram_quantile does), with what it covers. No posting in the window says so: never a
// figure of another span.
func latency(cur, start metrics.Totals) (string, string) {
	over := cur.At.Sub(start.At)
	window := fmt.Sprintf("the last %s", over.Round(time.Second))
	if over >= latencyWindow-rateWindow {
		window = fmt.Sprintf("the last %s", latencyWindow)
	}
	label := fmt.Sprintf("p%.0f over %s", latencyQuantile*100, window)
	if over <= 0 {
		return "—", fmt.Sprintf("p%.0f over the last %s: from the next reading on", latencyQuantile*100, latencyWindow)
	}
	n := cur.PostedCount - start.PostedCount
	if n == 0 || cur.PostedCount < start.PostedCount {
		return "—", fmt.Sprintf("no posting in %s", window)
	}
	q, ok := quantile(latencyQuantile, windowBuckets(cur.PostedBuckets, start.PostedBuckets), n)
	if !ok {
		return "—", label + ": above every bucket"
	}
	return formatAge(q), label
}

// windowBuckets are the cumulative bucket counts of the samples recorded between two readings.
func windowBuckets(cur, start []metrics.Bucket) []metrics.Bucket {
	out := make([]metrics.Bucket, len(cur))
	for i, b := range cur {
		out[i] = b
		for _, s := range start {
			if s.UpperBound == b.UpperBound && s.Count <= b.Count {
				out[i].Count = b.Count - s.Count
			}
		}
	}
	return out
}

// quantile is the q-quantile of total samples in cumulative buckets, interpolated linearly
// within its bucket; false when it lies above the highest bound.
func quantile(q float64, buckets []metrics.Bucket, total uint64) (time.Duration, bool) {
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, b := range buckets {
		if float64(b.Count) >= rank && b.Count > below {
			share := (rank - float64(below)) / float64(b.Count-below)
			return time.Duration((lower + (b.UpperBound-lower)*share) * float64(time.Second)), true
		}
		lower, below = b.UpperBound, b.Count
	}
	return 0, false
}

// remoteEvery is how often the other service's metrics are read at most, whatever the number
// of open consoles.
const remoteEvery = 2 * time.Second

// readRemote reads the other service's metrics, or returns the last reading when it is recent.
func (p *pipeline) readRemote(ctx context.Context) (metrics.Totals, error) {
	p.mu.Lock()
	last := p.remoteLast
	p.mu.Unlock()
	if !last.At.IsZero() && time.Since(last.At) < remoteEvery {
		return last, nil
	}
	t, err := p.remote(ctx)
	if err != nil {
		return t, err
	}
	p.mu.Lock()
	p.remoteLast = t
	p.mu.Unlock()
	return t, nil
}
