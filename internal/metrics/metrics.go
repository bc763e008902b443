// Package metrics owns what both services expose to Prometheus at GET /metrics: the pipeline's
// own metrics (names prefixed walletgl_, labelled service=wallet|gl), HTTP RED metrics per route
// pattern, the database pools' statistics and the Go runtime's. Names are promises to
// dashboards and alert rules (deploy/, checked against this package by deploy_test.go): see
// docs/operations.md#metrics-dashboard-and-alerts.
package metrics

import (
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one service's registry and the metrics the code updates. A nil *Metrics (and each
// nil part) records nothing, so packages can be used without it.
type Metrics struct {
	reg      *prometheus.Registry
	labels   prometheus.Labels // the service label every walletgl_ metric carries
	pools    *poolCollector
	Relay    *Relay
	Consumer *Consumer
	Outbox   *Outbox
	HTTP     *HTTP
	Wallet   *Wallet
	GL       *GL
}

// New returns the metrics of service ("wallet" or "gl"), with the Go runtime's and the process's.
func New(service string) *Metrics {
	reg := prometheus.NewRegistry()
	f := factory{reg: reg, labels: prometheus.Labels{"service": service}}
	pools := &poolCollector{labels: f.labels, pools: map[string]*pgxpool.Pool{}}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), pools)
	return &Metrics{
		reg: reg, labels: f.labels, pools: pools, Relay: newRelay(f), Consumer: newConsumer(f), Outbox: newOutbox(f), HTTP: newHTTP(f),
		Wallet: newWallet(f), GL: newGL(f),
	}
}

// ObserveHTTP records an answered request (a web.Observer); a nil *Metrics records nothing.
func (m *Metrics) ObserveHTTP(route, method string, status int, took time.Duration) {
	if m != nil {
		m.HTTP.Observe(route, method, status, took)
	}
}

// Transfers is the wallet's metrics; nil for a nil *Metrics.
func (m *Metrics) Transfers() *Wallet {
	if m == nil {
		return nil
	}
	return m.Wallet
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Pool exposes a pgxpool's statistics under name ("main", "relay").
func (m *Metrics) Pool(name string, pool *pgxpool.Pool) {
	if m == nil {
		return
	}
	m.pools.add(name, pool)
}

// Register adds a collector of the service's own (e.g. one reading the broker's state).
func (m *Metrics) Register(c prometheus.Collector) {
	if m != nil {
		m.reg.MustRegister(c)
	}
}

// factory makes metrics with the service label, registered.
type factory struct {
	reg    *prometheus.Registry
	labels prometheus.Labels
}

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: f.labels}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: f.labels}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: f.labels, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// latencyBuckets span the pipeline's latencies: a millisecond to a minute.
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// Relay is what a relay records.
type Relay struct {
	published   *prometheus.CounterVec
	errors      *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	republished *prometheus.CounterVec
	heldBack    *prometheus.GaugeVec
	stream      streamGauges
}

// streamGauges are the broker's figures of a relay's stream and of the durable consumers that
// read it, as the relay's last look at its room read them.
type streamGauges struct {
	messages, bytes, maxMessages, maxBytes *prometheus.GaugeVec // by stream
	pending, ackPending, redelivered       *prometheus.GaugeVec // by stream and consumer
}

func newStreamGauges(f factory) streamGauges {
	return streamGauges{
		messages:    f.gauge("walletgl_stream_messages", "Messages the relay's stream holds (JetStream state.messages).", "stream"),
		bytes:       f.gauge("walletgl_stream_bytes", "Bytes the relay's stream holds (JetStream state.bytes).", "stream"),
		maxMessages: f.gauge("walletgl_stream_max_messages", "The relay's stream's message limit (-1: none).", "stream"),
		maxBytes:    f.gauge("walletgl_stream_max_bytes", "The relay's stream's byte limit, EVENTS_STREAM_MAX_BYTES (-1: none).", "stream"),
		pending: f.gauge("walletgl_stream_consumer_pending_messages",
			"Messages of the relay's stream a durable consumer reading it has not been delivered yet (num_pending).", "stream", "consumer"),
		ackPending: f.gauge("walletgl_stream_consumer_ack_pending_messages",
			"Messages of the relay's stream delivered to a durable consumer and not acknowledged yet (num_ack_pending).", "stream", "consumer"),
		redelivered: f.gauge("walletgl_stream_consumer_redelivered_messages",
			"Messages of the relay's stream delivered to a durable consumer more than once and not acknowledged yet (num_redelivered).", "stream", "consumer"),
	}
}

// StreamState is what the broker said of a relay's stream at one look.
type StreamState struct {
	Name                  string
	Messages, Bytes       uint64
	MaxMessages, MaxBytes int64 // -1: no limit
}

// ReaderState is what the broker said of one durable consumer reading a relay's stream.
type ReaderState struct {
	Name                    string
	Pending                 uint64
	AckPending, Redelivered int
}

func newRelay(f factory) *Relay {
	r := &Relay{
		published:   f.counter("walletgl_relay_published_total", "Messages the broker stored (not counting duplicates it dropped)."),
		errors:      f.counter("walletgl_relay_publish_errors_total", "Publishes that failed, by reason: message (refused for itself), broker (refused or unreachable), timeout (no PubAck in time).", "reason"),
		seconds:     f.histogram("walletgl_relay_publish_seconds", "Time of a publish round, from the first send to the last PubAck.", latencyBuckets),
		republished: f.counter("walletgl_relay_republished_total", "Re-publishes of rows whose message the stream no longer held (aged out, pushed out, purged, lost)."),
		heldBack:    f.gauge("walletgl_relay_held_back", "1 while the relay holds rows back in the outbox because the events its stream's consumer has not read fill their share of EVENTS_STREAM_MAX_BYTES, else 0."),
		stream:      newStreamGauges(f),
	}
	r.heldBack.WithLabelValues().Set(0)
	zero(r.errors, "message", "broker", "timeout")
	return r
}

// zero exports c at 0 for each of its reasons before the first one happens: increase() and
// rate() see a counter's first sample as its start, so without a 0 first the first failure of a
// process would never make an alert fire (deploy/prometheus/alerts.yml).
func zero(c *prometheus.CounterVec, reasons ...string) {
	for _, r := range reasons {
		c.WithLabelValues(r)
	}
}

// Published records n messages stored, r of them re-publishes, by a round that took d.
func (r *Relay) Published(n, republished int, d time.Duration) {
	if r == nil {
		return
	}
	r.published.WithLabelValues().Add(float64(n))
	r.republished.WithLabelValues().Add(float64(republished))
	r.seconds.WithLabelValues().Observe(d.Seconds())
}

// HeldBack records whether the relay holds rows back for want of room in its stream.
func (r *Relay) HeldBack(held bool) {
	if r == nil {
		return
	}
	v := 0.0
	if held {
		v = 1
	}
	r.heldBack.WithLabelValues().Set(v)
}

// Stream records the broker's figures of the relay's stream and of the durable consumers that
// read it (a reader the broker does not know is left out).
func (r *Relay) Stream(st StreamState, readers []ReaderState) {
	if r == nil {
		return
	}
	g := r.stream
	g.messages.WithLabelValues(st.Name).Set(float64(st.Messages))
	g.bytes.WithLabelValues(st.Name).Set(float64(st.Bytes))
	g.maxMessages.WithLabelValues(st.Name).Set(float64(st.MaxMessages))
	g.maxBytes.WithLabelValues(st.Name).Set(float64(st.MaxBytes))
	for _, c := range readers {
		g.pending.WithLabelValues(st.Name, c.Name).Set(float64(c.Pending))
		g.ackPending.WithLabelValues(st.Name, c.Name).Set(float64(c.AckPending))
		g.redelivered.WithLabelValues(st.Name, c.Name).Set(float64(c.Redelivered))
	}
}

// PublishError records a failed publish.
func (r *Relay) PublishError(reason string) {
	if r != nil {
		r.errors.WithLabelValues(reason).Inc()
	}
}

// Consumer is what a consumer records.
type Consumer struct {
	processed  *prometheus.CounterVec
	failed     *prometheus.CounterVec
	duplicates *prometheus.CounterVec
	pending    *prometheus.GaugeVec
	batch      *prometheus.HistogramVec
	deleted    *prometheus.CounterVec
	waiting    *prometheus.GaugeVec
	oldestWait *prometheus.GaugeVec
	released   *prometheus.CounterVec
}

func newConsumer(f factory) *Consumer {
	c := &Consumer{
		processed:  f.counter("walletgl_consumer_processed_total", "Events applied and committed.", "event_type"),
		failed:     f.counter("walletgl_consumer_failed_total", "Events recorded failed in the inbox, by reason: malformed, conflict, exhausted, unauthenticated, abandoned.", "reason"),
		duplicates: f.counter("walletgl_inbox_duplicates_total", "Deliveries the inbox recognised as events it had seen."),
		pending:    f.gauge("walletgl_consumer_pending_messages", "Messages of the stream the durable consumer has not been delivered yet (JetStream num_pending)."),
		batch:      f.histogram("walletgl_consumer_batch_seconds", "Time to apply a fetched batch, from its first claim to its commit.", latencyBuckets),
		deleted:    f.counter("walletgl_inbox_deleted_total", "Inbox rows of processed events deleted past the inbox retention (EVENTS_INBOX_RETENTION)."),
		waiting: f.gauge("walletgl_inbox_waiting_events",
			"Events parked in the inbox (status waiting) until the event they wait for posts, as the consumer last counted them."),
		oldestWait: f.gauge("walletgl_inbox_waiting_oldest_seconds", "Age of the oldest waiting inbox event (0: none)."),
		released:   f.counter("walletgl_inbox_waiting_released_total", "Waiting events applied once the event they waited for posted."),
	}
	zero(c.failed, "malformed", "conflict", "exhausted", "unauthenticated", "abandoned") // contract.Reason*
	c.deleted.WithLabelValues()                                                          // exported at 0, as the reasons above
	return c
}

// Processed records n fresh events of eventType and dups duplicates, committed.
func (c *Consumer) Processed(eventType string, n, dups int) {
	if c == nil {
		return
	}
	c.processed.WithLabelValues(eventType).Add(float64(n))
	c.duplicates.WithLabelValues().Add(float64(dups))
}

// Batch records the time a fetched batch took to handle.
func (c *Consumer) Batch(t time.Duration) {
	if c != nil {
		c.batch.WithLabelValues().Observe(t.Seconds())
	}
}

// Failed records an event recorded failed.
func (c *Consumer) Failed(reason string) {
	if c != nil {
		c.failed.WithLabelValues(reason).Inc()
	}
}

// InboxDeleted records n inbox rows deleted by the inbox retention.
func (c *Consumer) InboxDeleted(n int64) {
	if c != nil {
		c.deleted.WithLabelValues().Add(float64(n))
	}
}

// Waiting sets how many events wait in the inbox, and the oldest one's age.
func (c *Consumer) Waiting(n int64, oldest time.Duration) {
	if c != nil {
		c.waiting.WithLabelValues().Set(float64(n))
		c.oldestWait.WithLabelValues().Set(oldest.Seconds())
	}
}

// Released records a waiting event applied.
func (c *Consumer) Released() {
	if c != nil {
		c.released.WithLabelValues().Inc()
	}
}

// Pending sets the durable consumer's num_pending.
func (c *Consumer) Pending(n uint64) {
	if c != nil {
		c.pending.WithLabelValues().Set(float64(n))
	}
}

// Wallet is what the wallet records.
type Wallet struct {
	transfers *prometheus.CounterVec
	batchSize *prometheus.HistogramVec
}

func newWallet(f factory) *Wallet {
	return &Wallet{
		transfers: f.counter("walletgl_transfers_total", "Transfer requests answered, by result: created, replayed, refused, failed.", "result"),
		batchSize: f.histogram("walletgl_batch_size", "Transfer requests committed per transaction (group commit).", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}),
	}
}

// Transfer records a transfer request's result.
func (w *Wallet) Transfer(result string) {
	if w != nil {
		w.transfers.WithLabelValues(result).Inc()
	}
}

// Batch records the size of a committed group-commit batch.
func (w *Wallet) Batch(n int) {
	if w != nil {
		w.batchSize.WithLabelValues().Observe(float64(n))
	}
}

// GL is what the GL records.
type GL struct {
	commitToPosted *prometheus.HistogramVec
}

func newGL(f factory) *GL {
	return &GL{commitToPosted: f.histogram("walletgl_commit_to_posted_seconds",
		"Time from a transfer's commit in the wallet (the event's occurrence) to its posting in the GL.", latencyBuckets)}
}

// Posted records the time from a transfer's occurrence to its posting.
func (g *GL) Posted(occurred, posted time.Time) {
	if g != nil {
		g.commitToPosted.WithLabelValues().Observe(max(posted.Sub(occurred), 0).Seconds())
	}
}
