package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The bench scrapes both services' GET /metrics (on their *_METRICS_ADDR) as Prometheus would:
// at the start, every ScrapeInterval and at the end of the run. The report then says, for every
// metric docs/operations.md names, whether it moved during the run.

// ScrapeInterval is the bench's own scrape interval, shorter than a production Prometheus's
// (15 s) so that a quick run still has a dozen scrapes.
const ScrapeInterval = 5 * time.Second

// acceptText is what a Prometheus asks for: the text format.
const acceptText = "text/plain;version=0.0.4;q=0.9,*/*;q=0.1"

// expectation says what a metric does in a healthy run.
type expectation int

const (
	// moves: the run's traffic changes it.
	moves expectation = iota
	// onTrouble: only a failure, a refusal, a late acknowledgment or a redelivery changes it; a
	// healthy run leaves it at 0.
	onTrouble
)

// watched is one metric of the list: its name as exposed (a histogram's or a summary's
// family name), the services that expose it, and what a healthy run does to it.
type watched struct {
	name     string
	services []string
	expect   expectation
	note     string // when it moves, or why it may not
}

var bothServices = []string{"wallet", "gl"}

// watchedMetrics is the list, with the HTTP RED metrics, the pools' and the runtime's.
var watchedMetrics = []watched{
	{name: "walletgl_outbox_rows", services: bothServices},
	{name: "walletgl_outbox_oldest_pending_seconds", services: bothServices, expect: onTrouble,
		note: "rows waiting for a relay's claim: with publish on commit a committed row is written already claimed, so only the wallet's backlog phase (rows written while it was stopped) or a failing publish leaves rows pending"},
	{name: "walletgl_outbox_oldest_unacknowledged_seconds", services: bothServices},
	{name: "walletgl_relay_published_total", services: bothServices},
	{name: "walletgl_relay_publish_errors_total", services: bothServices, expect: onTrouble,
		note: "a broker that refuses or times out"},
	{name: "walletgl_relay_publish_seconds", services: bothServices},
	{name: "walletgl_relay_republished_total", services: bothServices, expect: onTrouble,
		note: "rows acknowledged later than EVENTS_ACK_TIMEOUT (30 s): the backlog phase may cause them"},
	{name: "walletgl_consumer_processed_total", services: bothServices},
	{name: "walletgl_consumer_failed_total", services: bothServices, expect: onTrouble,
		note: "malformed, conflicting, unauthenticated or exhausted events"},
	{name: "walletgl_inbox_duplicates_total", services: bothServices, expect: onTrouble,
		note: "a redelivery of an event already applied (a lost ack)"},
	{name: "walletgl_consumer_pending_messages", services: bothServices},
	{name: "walletgl_consumer_batch_seconds", services: bothServices},
	{name: "walletgl_commit_to_posted_seconds", services: []string{"gl"}},
	{name: "walletgl_transfers_total", services: []string{"wallet"}},
	{name: "walletgl_batch_size", services: []string{"wallet"}},
	{name: "walletgl_http_requests_total", services: bothServices,
		note: "the GL's API is asked only for /healthz, when the bench starts it"},
	{name: "walletgl_http_request_seconds", services: bothServices},
	{name: "walletgl_db_pool_connections", services: bothServices},
	{name: "walletgl_db_pool_acquires_total", services: bothServices},
	{name: "walletgl_db_pool_acquire_wait_seconds_total", services: bothServices},
	{name: "walletgl_db_pool_empty_acquires_total", services: bothServices},
	{name: "go_goroutines", services: bothServices},
	{name: "go_memstats_heap_alloc_bytes", services: bothServices},
	{name: "go_gc_duration_seconds", services: bothServices},
	{name: "process_cpu_seconds_total", services: bothServices},
	{name: "go_sched_gomaxprocs_threads", services: bothServices}, // what -gomaxprocs set
}

// family is one metric family at one scrape: its type and the value of each series (a
// histogram's or a summary's sample count), by its labels.
type family struct {
	kind   dto.MetricType
	series map[string]float64
}

// scrape is one service's /metrics at one moment.
type scrape struct {
	at       time.Time
	started  float64           // process_start_time_seconds: a change is a restart
	families map[string]family // only the watched ones
	err      error
}

// scrapeTarget is one service's metrics endpoint.
type scrapeTarget struct {
	service string
	url     string // http://addr/metrics
}

// scraper scrapes its targets and keeps what it read, per service.
type scraper struct {
	client   *http.Client
	targets  []scrapeTarget
	interval time.Duration

	mu      sync.Mutex
	scrapes map[string][]scrape
}

func newScraper(targets []scrapeTarget, interval time.Duration) *scraper {
	return &scraper{client: &http.Client{Timeout: 10 * time.Second}, targets: targets, interval: interval,
		scrapes: map[string][]scrape{}}
}

// run scrapes every target now and every interval until ctx ends, then once more: the start,
// the run and its end. The caller owns it: it cancels ctx and waits for run to return.
// A scrape under way when ctx ends is finished, not cancelled: it would be recorded as a
// failed scrape of a healthy service. The client's timeout bounds it.
func (s *scraper) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.scrapeAll(context.WithoutCancel(ctx))
		select {
		case <-ctx.Done():
			s.scrapeAll(context.WithoutCancel(ctx))
			return
		case <-t.C:
		}
	}
}

// start runs the scraper in a goroutine; the function it returns stops it, waits for the final
// scrape and returns.
func (s *scraper) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(ctx)
	}()
	return func() { cancel(); <-done }
}

func (s *scraper) scrapeAll(ctx context.Context) {
	for _, t := range s.targets {
		sc := s.scrapeOnce(ctx, t)
		s.mu.Lock()
		s.scrapes[t.service] = append(s.scrapes[t.service], sc)
		s.mu.Unlock()
	}
}

// scrapeOnce reads t's /metrics and keeps the watched families; a service that is stopped (the
// bench stops each once) gives a scrape with its error.
func (s *scraper) scrapeOnce(ctx context.Context, t scrapeTarget) scrape {
	sc := scrape{at: time.Now()}
	fams, err := s.fetch(ctx, t)
	if err != nil {
		sc.err = err
		return sc
	}
	sc.families = map[string]family{}
	if mf, ok := fams["process_start_time_seconds"]; ok && len(mf.GetMetric()) > 0 {
		sc.started = mf.GetMetric()[0].GetGauge().GetValue()
	}
	for _, w := range watchedMetrics {
		if mf, ok := fams[w.name]; ok {
			sc.families[w.name] = summarizeFamily(mf)
		}
	}
	return sc
}

// fetch GETs t's /metrics and decodes it with expfmt into metric families by name.
func (s *scraper) fetch(ctx context.Context, t scrapeTarget) (map[string]*dto.MetricFamily, error) {
	body, format, err := s.raw(ctx, t)
	if err != nil {
		return nil, err
	}
	fams, err := decodeFamilies(bytes.NewReader(body), format)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", t.service, err)
	}
	return fams, nil
}

// raw GETs t's /metrics as a Prometheus would and returns the exposition and its format.
func (s *scraper) raw(ctx context.Context, t scrapeTarget) ([]byte, expfmt.Format, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return nil, "", fmt.Errorf("scrape %s: %w", t.service, err)
	}
	req.Header.Set("Accept", acceptText)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("scrape %s: %w", t.service, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("scrape %s: read: %w", t.service, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("scrape %s: %s: %s", t.service, resp.Status, errorDetail(body))
	}
	return body, expfmt.ResponseFormat(resp.Header), nil
}

// errorDetail is a failed scrape's answer on one line; promhttp ends it with the failing
// collector's error, so a long one keeps its end.
func errorDetail(body []byte) string {
	const most = 400
	detail := strings.Join(strings.Fields(string(body)), " ")
	if r := []rune(detail); len(r) > most {
		detail = "…" + string(r[len(r)-most:])
	}
	return detail
}

// decodeFamilies reads every metric family of an exposition in format.
func decodeFamilies(r io.Reader, format expfmt.Format) (map[string]*dto.MetricFamily, error) {
	dec := expfmt.NewDecoder(r, format)
	out := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode metrics: %w", err)
		}
		out[mf.GetName()] = mf
	}
}

// summarizeFamily keeps a family's type and each series' value: a counter's or a gauge's value,
// a histogram's or a summary's count of observations.
func summarizeFamily(mf *dto.MetricFamily) family {
	f := family{kind: mf.GetType(), series: map[string]float64{}}
	for _, m := range mf.GetMetric() {
		var v float64
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			v = m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v = m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v = float64(m.GetHistogram().GetSampleCount())
		case dto.MetricType_SUMMARY:
			v = float64(m.GetSummary().GetSampleCount())
		default:
			v = m.GetUntyped().GetValue()
		}
		f.series[seriesKey(m.GetLabel())] = v
	}
	return f
}

// seriesKey is a series' labels, sorted, as name="value" pairs.
func seriesKey(labels []*dto.LabelPair) string {
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// MetricMovement is what one metric of one service did over the run.
type MetricMovement struct {
	Name    string  `json:"name"`
	Service string  `json:"service"`
	Type    string  `json:"type,omitempty"`
	Start   float64 `json:"start"` // at the first scrape that had it (a histogram's count; series summed)
	End     float64 `json:"end"`   // at the last
	// Increase is a counter's or a histogram's rise over the run, series by series, a fall read
	// as a restart of the process (as Prometheus's increase()); Min and Max a gauge's extremes.
	Increase float64 `json:"increase,omitempty"`
	Min      float64 `json:"min,omitempty"`
	Max      float64 `json:"max,omitempty"`
	Moved    bool    `json:"moved"`
	Verdict  string  `json:"verdict"`
	Note     string  `json:"note,omitempty"`
}

// MetricsSection is the report's Metrics section: the scrapes and what each metric did.
type MetricsSection struct {
	Interval string           `json:"interval"`
	Scrapes  []ScrapeCount    `json:"scrapes"`
	Metrics  []MetricMovement `json:"metrics"`
	Overhead *MetricsOverhead `json:"overhead,omitempty"`
	Plans    []QueryPlan      `json:"collector_query_plans,omitempty"`
	Notes    []string         `json:"notes,omitempty"`
}

// ScrapeCount is how many scrapes of a service answered, and why the others did not.
type ScrapeCount struct {
	Service  string   `json:"service"`
	OK       int      `json:"ok"`
	Failed   int      `json:"failed"`
	Restarts int      `json:"restarts"`         // process_start_time_seconds changed: the bench restarted it
	Errors   []string `json:"errors,omitempty"` // each failed scrape: when, why
}

// section judges every watched metric of every service from what the scraper read.
func (s *scraper) section() *MetricsSection {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := &MetricsSection{Interval: s.interval.String()}
	for _, t := range s.targets {
		// The scrapes after a restart run beside the periodic ones: in order of time.
		slices.SortStableFunc(s.scrapes[t.service], func(a, b scrape) int { return a.at.Compare(b.at) })
		count := ScrapeCount{Service: t.service}
		var started float64
		for _, sc := range s.scrapes[t.service] {
			if sc.err != nil {
				count.Failed++
				count.Errors = append(count.Errors, fmt.Sprintf("%s: %s", sc.at.UTC().Format("15:04:05"), firstLine(sc.err.Error())))
				continue
			}
			if count.OK > 0 && sc.started != started {
				count.Restarts++
			}
			count.OK++
			started = sc.started
		}
		sec.Scrapes = append(sec.Scrapes, count)
		for _, w := range watchedMetrics {
			sec.Metrics = append(sec.Metrics, movement(w, t.service, s.scrapes[t.service]))
		}
	}
	return sec
}

// movement says what w did in the scrapes of service: a counter, histogram or summary moved if
// it rose; a gauge if it changed or was non-zero at some scrape. A metric that only trouble
// moves and stayed 0 is said to have had no such event, not to have failed.
func movement(w watched, service string, scrapes []scrape) MetricMovement {
	mv := MetricMovement{Name: w.name, Service: service}
	var (
		seen      []family // at every scrape that answered; empty where the family was not exposed yet
		restarted []bool   // the process restarted since the scrape before in seen
		started   float64
		kind      dto.MetricType
		exposed   bool
	)
	for _, sc := range scrapes {
		if sc.err != nil {
			continue
		}
		f, ok := sc.families[w.name]
		if ok && !exposed {
			kind, exposed = f.kind, true
		}
		restarted = append(restarted, len(seen) > 0 && sc.started != started)
		seen, started = append(seen, f), sc.started
	}
	if !exposed {
		mv.Verdict = "absent at every scrape"
		if !slices.Contains(w.services, service) {
			mv.Verdict = "not this service's metric"
		}
		return mv
	}
	mv.Type = strings.ToLower(kind.String())
	mv.Start, mv.End = total(seen[0]), total(seen[len(seen)-1])
	if kind == dto.MetricType_GAUGE || kind == dto.MetricType_UNTYPED {
		mv.Min, mv.Max = gaugeRange(seen)
		mv.Moved = mv.Min != mv.Max || mv.Max != 0 || mv.Min != 0
	} else {
		mv.Increase = increase(seen, restarted)
		mv.Moved = mv.Increase > 0
	}
	switch {
	case mv.Moved && w.expect == onTrouble:
		mv.Verdict = "moved"
		mv.Note = "caused by: " + w.note
	case mv.Moved:
		mv.Verdict = "moved"
	case w.expect == onTrouble:
		mv.Verdict = "stayed 0 (no such event in this run)"
		mv.Note = "moves on " + w.note
	default:
		mv.Verdict = "DID NOT MOVE"
		mv.Note = w.note
	}
	return mv
}

// total is the sum of a family's series.
func total(f family) float64 {
	var sum float64
	for _, v := range f.series {
		sum += v
	}
	return sum
}

// gaugeRange is the least and the greatest value any series of a gauge had at any scrape.
func gaugeRange(fs []family) (lo, hi float64) {
	first := true
	for _, f := range fs {
		for _, v := range f.series {
			if first || v < lo {
				lo = v
			}
			if first || v > hi {
				hi = v
			}
			first = false
		}
	}
	return lo, hi
}

// increase is how much a counter (or a histogram's count) rose over the scrapes, series by
// series. After a restart of the process (restarted[i]: its start time changed since scrape
// i-1), or where a value is lower than the one before, the counter started again from 0 and
// the new value is all it rose by since (as Prometheus's increase() reads a counter reset). A
// series that appears after the first scrape rose from 0.
func increase(fs []family, restarted []bool) float64 {
	var sum float64
	prev := map[string]float64{}
	for i, f := range fs {
		if restarted[i] {
			clear(prev)
		}
		for key, v := range f.series {
			before, ok := prev[key]
			switch {
			case !ok && i == 0:
				// the first scrape is the start: nothing rose yet
			case !ok || v < before:
				sum += v
			default:
				sum += v - before
			}
			prev[key] = v
		}
	}
	return sum
}
