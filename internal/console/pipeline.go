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
	remoteOlder  metrics.Totals
	remoteNewer  metrics.Totals
	remoteLast   metrics.Totals
}

// pipelineView is the header as shown.
type pipelineView struct {
	Published  string // events this service's relay had the broker store, per second
	Processed  string // events this service's consumer applied, per second
	Latency    string // commit → posted, mean over the window (or since start)
	LatencyFor string // what the latency covers
	Pending    string // messages the consumer has not been delivered yet
	Oldest     string // the oldest unacknowledged outbox row's age
	Stale      bool   // the metrics could not be read
	At         string
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
		At:        cur.At.UTC().Format("15:04:05Z"),
	}
	latencySource, latencyOlder := cur, older
	if p.remote != nil {
		remote, err := p.readRemote(ctx)
		if err != nil {
			zerolog.Ctx(ctx).Debug().Err(err).Msg("console: read the other service's metrics")
			v.Latency, v.LatencyFor = "—", "the GL's metrics cannot be read with GL_API_KEY (needs metrics:read)"
			return v
		}
		latencySource, latencyOlder = remote, p.advance(&p.remoteOlder, &p.remoteNewer, remote)
	}
	v.Latency, v.LatencyFor = latency(latencySource, latencyOlder)
	return v
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

// latency is the mean commit → posted time of the postings between the two readings, or of
// all since the GL started when there were none.
func latency(cur, older metrics.Totals) (string, string) {
	if n := cur.PostedCount - older.PostedCount; n > 0 && cur.At.After(older.At) {
		mean := time.Duration((cur.PostedSeconds - older.PostedSeconds) / float64(n) * float64(time.Second))
		return formatAge(mean), fmt.Sprintf("mean of %d postings in the last %s", n, cur.At.Sub(older.At).Round(time.Second))
	}
	if cur.PostedCount > 0 {
		mean := time.Duration(cur.PostedSeconds / float64(cur.PostedCount) * float64(time.Second))
		return formatAge(mean), fmt.Sprintf("mean of all %d postings since the GL started", cur.PostedCount)
	}
	return "—", "no posting since the GL started"
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
