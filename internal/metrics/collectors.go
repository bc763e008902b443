package metrics

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// HTTP is the RED metrics of an HTTP API, per route pattern.
type HTTP struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
}

func newHTTP(f factory) *HTTP {
	return &HTTP{
		requests: f.counter("walletgl_http_requests_total", "HTTP requests answered, by route pattern, method and status class (2xx, 4xx, 5xx).", "route", "method", "code"),
		seconds:  f.histogram("walletgl_http_request_seconds", "Time to answer an HTTP request, by route pattern.", latencyBuckets, "route"),
	}
}

// Observe records one answered request; route is the mux pattern ("" for none: unrouted).
func (h *HTTP) Observe(route, method string, status int, d time.Duration) {
	if h == nil {
		return
	}
	if route == "" {
		route = "unrouted"
	}
	h.requests.WithLabelValues(route, method, strconv.Itoa(status/100)+"xx").Inc()
	h.seconds.WithLabelValues(route).Observe(d.Seconds())
}

// OutboxSample is the state of an outbox at one moment: rows per status (those the relay still
// works on, and dead letters) and how long the oldest have waited.
type OutboxSample struct {
	Rows                 map[string]int64
	OldestPending        time.Duration
	OldestUnacknowledged time.Duration
}

// Outbox reads an outbox's state when scraped.
type Outbox struct {
	rows, oldestPending, oldestUnacknowledged *prometheus.Desc
	labels                                    prometheus.Labels
	sample                                    func(context.Context) (OutboxSample, error)
}

func newOutbox(f factory) *Outbox {
	return &Outbox{
		rows: prometheus.NewDesc("walletgl_outbox_rows", "Outbox rows by status (acknowledged rows are not counted: they only wait for retention).",
			[]string{"status"}, f.labels),
		oldestPending: prometheus.NewDesc("walletgl_outbox_oldest_pending_seconds", "Age of the oldest pending outbox row (0: none).", nil, f.labels),
		oldestUnacknowledged: prometheus.NewDesc("walletgl_outbox_oldest_unacknowledged_seconds",
			"Age of the oldest outbox row not yet acknowledged by the other service (0: none).", nil, f.labels),
		labels: f.labels,
	}
}

// Sample registers how the outbox is read at each scrape: it must read only what the relay
// works on (partial indexes), never every row.
func (m *Metrics) Sample(sample func(context.Context) (OutboxSample, error)) {
	if m == nil {
		return
	}
	m.Outbox.sample = sample
	m.reg.MustRegister(m.Outbox)
}

// Describe implements prometheus.Collector.
func (o *Outbox) Describe(ch chan<- *prometheus.Desc) {
	ch <- o.rows
	ch <- o.oldestPending
	ch <- o.oldestUnacknowledged
}

// Collect implements prometheus.Collector: one bounded read of the outbox per scrape.
func (o *Outbox) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := o.sample(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(o.rows, err)
		return
	}
	for status, n := range s.Rows {
		ch <- prometheus.MustNewConstMetric(o.rows, prometheus.GaugeValue, float64(n), status)
	}
	ch <- prometheus.MustNewConstMetric(o.oldestPending, prometheus.GaugeValue, s.OldestPending.Seconds())
	ch <- prometheus.MustNewConstMetric(o.oldestUnacknowledged, prometheus.GaugeValue, s.OldestUnacknowledged.Seconds())
}

// inboxCollector reads the inbox's failed events when scraped.
type inboxCollector struct {
	failed *prometheus.Desc
	count  func(context.Context) (int64, error)
}

// SampleInbox registers how the inbox's failed events (its dead letters; resolved ones are not
// failed) are counted at each scrape: through their partial index, at most limit of them (a
// value of limit reads "at least").
func (m *Metrics) SampleInbox(limit int64, count func(context.Context) (int64, error)) {
	if m == nil {
		return
	}
	m.reg.MustRegister(&inboxCollector{
		failed: prometheus.NewDesc("walletgl_inbox_failed_events",
			fmt.Sprintf("Failed inbox events not resolved (the inbox's dead letters), counted up to %d: %d reads at least %d.", limit, limit, limit),
			nil, m.labels),
		count: count,
	})
}

// Describe implements prometheus.Collector.
func (i *inboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- i.failed }

// Collect implements prometheus.Collector: one bounded count of the inbox per scrape.
func (i *inboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := i.count(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(i.failed, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(i.failed, prometheus.GaugeValue, float64(n))
}

// poolCollector exposes the statistics of the service's database pools, by pool name.
type poolCollector struct {
	labels prometheus.Labels
	mu     sync.Mutex
	pools  map[string]*pgxpool.Pool
}

func (p *poolCollector) add(name string, pool *pgxpool.Pool) {
	p.mu.Lock()
	p.pools[name] = pool
	p.mu.Unlock()
}

func (p *poolCollector) descs() (conns, acquires, waited, empty *prometheus.Desc) {
	return prometheus.NewDesc("walletgl_db_pool_connections", "Connections of a database pool, by state: acquired, idle, constructing; and max.", []string{"pool", "state"}, p.labels),
		prometheus.NewDesc("walletgl_db_pool_acquires_total", "Connections acquired from a database pool.", []string{"pool"}, p.labels),
		prometheus.NewDesc("walletgl_db_pool_acquire_wait_seconds_total", "Time spent waiting for a connection of a database pool.", []string{"pool"}, p.labels),
		prometheus.NewDesc("walletgl_db_pool_empty_acquires_total", "Acquires that had to wait because the pool was empty.", []string{"pool"}, p.labels)
}

// Describe implements prometheus.Collector.
func (p *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	conns, acquires, waited, empty := p.descs()
	for _, d := range []*prometheus.Desc{conns, acquires, waited, empty} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (p *poolCollector) Collect(ch chan<- prometheus.Metric) {
	conns, acquires, waited, empty := p.descs()
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, pool := range p.pools {
		s := pool.Stat()
		for state, n := range map[string]int32{"acquired": s.AcquiredConns(), "idle": s.IdleConns(),
			"constructing": s.ConstructingConns(), "max": s.MaxConns()} {
			ch <- prometheus.MustNewConstMetric(conns, prometheus.GaugeValue, float64(n), name, state)
		}
		ch <- prometheus.MustNewConstMetric(acquires, prometheus.CounterValue, float64(s.AcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(waited, prometheus.CounterValue, s.AcquireDuration().Seconds(), name)
		ch <- prometheus.MustNewConstMetric(empty, prometheus.CounterValue, float64(s.EmptyAcquireCount()), name)
	}
}
