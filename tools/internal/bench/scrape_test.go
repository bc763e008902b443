package bench

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"walletgl/internal/metrics"
)

// process stands for one run of a service: its metrics, served at the same address across
// restarts, as the bench's services are.
type process struct {
	current atomic.Pointer[metrics.Metrics]
	down    atomic.Bool
	pending atomic.Int64 // the outbox's pending rows, read at each scrape
}

func newProcess(t *testing.T) (*process, *httptest.Server) {
	t.Helper()
	p := &process{}
	p.restart()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.down.Load() {
			http.Error(w, "stopped", http.StatusServiceUnavailable)
			return
		}
		p.current.Load().Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return p, srv
}

// restart gives the process a new registry: its counters start again from 0.
func (p *process) restart() *metrics.Metrics {
	m := metrics.New("wallet")
	m.Sample(func(context.Context) (metrics.OutboxSample, error) {
		n := p.pending.Load()
		return metrics.OutboxSample{Rows: map[string]int64{"pending": n, "dispatched": 0}, OldestPending: time.Duration(n) * time.Millisecond}, nil
	})
	p.current.Store(m)
	return m
}

func movementOf(t *testing.T, sec *MetricsSection, service, name string) MetricMovement {
	t.Helper()
	for _, mv := range sec.Metrics {
		if mv.Service == service && mv.Name == name {
			return mv
		}
	}
	t.Fatalf("no movement of %s %s in the section", service, name)
	return MetricMovement{}
}

// TestScraperJudgesWhatMovedOnARealRegistry scrapes the wallet's real registry (internal/metrics)
// through its real handler at the start, during and at the end of a run in which the process is
// stopped and restarted once, and checks the verdict of each kind of metric.
func TestScraperJudgesWhatMovedOnARealRegistry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, srv := newProcess(t)
	s := newScraper([]scrapeTarget{{service: "wallet", url: srv.URL + "/metrics"}}, time.Hour)

	s.scrapeAll(ctx) // the start: nothing observed yet
	m := p.current.Load()
	for range 3 {
		m.Transfers().Transfer("created")
	}
	m.Wallet.Batch(3)
	m.Relay.Published(3, 0, 2*time.Millisecond)
	m.ObserveHTTP("POST /v1/transfers", "POST", 201, time.Millisecond)
	p.pending.Store(7)
	s.scrapeAll(ctx)

	p.down.Store(true) // the bench stops the service: that scrape fails, the run goes on
	s.scrapeAll(ctx)
	p.down.Store(false)
	m = p.restart()
	m.Transfers().Transfer("created")
	m.Transfers().Transfer("created")
	p.pending.Store(0)
	s.scrapeAll(ctx) // the end

	sec := s.section()
	require.Equal(t, []ScrapeCount{{Service: "wallet", OK: 3, Failed: 1, Errors: sec.Scrapes[0].Errors}}, sec.Scrapes,
		"one process: its start time never changed")
	require.Len(t, sec.Scrapes[0].Errors, 1)
	assert.Contains(t, sec.Scrapes[0].Errors[0], "503 Service Unavailable: stopped", "the status and the answer's body")

	transfers := movementOf(t, sec, "wallet", "walletgl_transfers_total")
	assert.True(t, transfers.Moved)
	assert.Equal(t, "counter", transfers.Type)
	assert.Equal(t, 3.0+2.0, transfers.Increase, "3 before the restart, 2 after it: a fall is a restart, not a loss")
	assert.Equal(t, 0.0, transfers.Start, "not exposed before its first transfer: it rose from 0")
	assert.Equal(t, 2.0, transfers.End)

	batch := movementOf(t, sec, "wallet", "walletgl_batch_size")
	assert.Equal(t, "histogram", batch.Type)
	assert.Equal(t, 1.0, batch.Increase, "a histogram moves by its count of observations")
	assert.Equal(t, "moved", batch.Verdict)

	rows := movementOf(t, sec, "wallet", "walletgl_outbox_rows")
	assert.Equal(t, "gauge", rows.Type)
	assert.True(t, rows.Moved, "a gauge moves when it changes")
	assert.Equal(t, 7.0, rows.Max)
	assert.Equal(t, 0.0, rows.End)

	errs := movementOf(t, sec, "wallet", "walletgl_relay_publish_errors_total")
	assert.False(t, errs.Moved)
	assert.Equal(t, "stayed 0 (no such event in this run)", errs.Verdict, "exposed at 0 for each reason, and no error happened")

	pending := movementOf(t, sec, "wallet", "walletgl_consumer_pending_messages")
	assert.False(t, pending.Moved)
	assert.Equal(t, "absent at every scrape", pending.Verdict, "no consumer set it: not claimed as moving")

	batchSeconds := movementOf(t, sec, "wallet", "walletgl_consumer_batch_seconds")
	assert.Equal(t, "absent at every scrape", batchSeconds.Verdict)

	posted := movementOf(t, sec, "wallet", "walletgl_commit_to_posted_seconds")
	assert.Equal(t, "not this service's metric", posted.Verdict)

	goroutines := movementOf(t, sec, "wallet", "go_goroutines")
	assert.True(t, goroutines.Moved, "the Go runtime's gauges are non-zero")

	assert.Contains(t, sec.summary(), "did not move")
}

// TestAGaugeThatStaysZeroDidNotMove keeps the outbox empty: its gauges are exposed at 0 at every
// scrape, and the section says they did not move rather than claiming they did.
func TestAGaugeThatStaysZeroDidNotMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, srv := newProcess(t)
	s := newScraper([]scrapeTarget{{service: "wallet", url: srv.URL + "/metrics"}}, time.Hour)
	s.scrapeAll(ctx)
	s.scrapeAll(ctx)
	oldest := movementOf(t, s.section(), "wallet", "walletgl_outbox_oldest_unacknowledged_seconds")
	assert.Equal(t, "gauge", oldest.Type)
	assert.False(t, oldest.Moved)
	assert.Equal(t, "DID NOT MOVE", oldest.Verdict)
}

// TestScraperRunsUntilStopped checks the scraper's own loop: a scrape at its start, one per
// interval, and a last one when it is stopped.
func TestScraperRunsUntilStopped(t *testing.T) {
	t.Parallel()
	_, srv := newProcess(t)
	s := newScraper([]scrapeTarget{{service: "wallet", url: srv.URL + "/metrics"}}, 20*time.Millisecond)
	stop := s.start(context.Background())
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.scrapes["wallet"]) >= 3
	}, 5*time.Second, 5*time.Millisecond)
	stop()
	n := len(s.scrapes["wallet"])
	stop() // stopping twice is harmless: the run's error paths stop it again
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, n, len(s.scrapes["wallet"]), "no scrape after stop")
	for _, sc := range s.scrapes["wallet"] {
		assert.NoError(t, sc.err)
		assert.NotZero(t, sc.started, "process_start_time_seconds was read")
	}
}

func TestParseCPUPerOpTakesTheLeastOfTheRuns(t *testing.T) {
	t.Parallel()
	out := `goos: linux
BenchmarkPerTransfer-2   	  200000	      2176 ns/op	      1017 cpu-ns/op	       3 B/op	       1 allocs/op
BenchmarkPerTransfer-2   	  200000	      1900 ns/op	       981.5 cpu-ns/op	       3 B/op	       1 allocs/op
BenchmarkPerTransferX-2  	  200000	      1 ns/op	       1 cpu-ns/op
PASS`
	v, err := parseCPUPerOp(out, "BenchmarkPerTransfer")
	require.NoError(t, err)
	assert.Equal(t, 981.5, v)
	_, err = parseCPUPerOp("PASS", "BenchmarkPerTransfer")
	assert.Error(t, err)
}

func TestReadPlanFindsSequentialScansAndParallelWorkers(t *testing.T) {
	t.Parallel()
	raw := []byte(`[{"Plan": {"Node Type": "Gather", "Workers Launched": 2, "Plans": [{"Node Type": "Aggregate", "Plans": [
		{"Node Type": "Index Scan", "Relation Name": "outbox", "Index Name": "outbox_work_idx"},
		{"Node Type": "Bitmap Heap Scan", "Relation Name": "outbox", "Plans": [
			{"Node Type": "Bitmap Index Scan", "Index Name": "outbox_dispatched_idx"}]},
		{"Node Type": "Seq Scan", "Relation Name": "outbox"}]}]}, "Execution Time": 1.25}]`)
	p, err := readPlan(raw)
	require.NoError(t, err)
	assert.Equal(t, []string{"Index Scan outbox using outbox_work_idx", "Bitmap Heap Scan outbox",
		"Bitmap Index Scan using outbox_dispatched_idx", "Seq Scan outbox"}, p.Scans)
	assert.Equal(t, []string{"Seq Scan outbox"}, p.SeqScans)
	assert.Equal(t, 2, p.Workers)
	assert.Equal(t, 1.25, p.ExecMS)
}

// A counter that rose past its old value after a restart would look like a small rise; the
// process's start time says it started again from 0.
func TestIncreaseReadsARestartByTheStartTime(t *testing.T) {
	t.Parallel()
	series := func(v float64) family {
		return family{series: map[string]float64{`result="created"`: v}}
	}
	scrapes := []family{series(1), series(3), series(5)}
	assert.Equal(t, 4.0, increase(scrapes, []bool{false, false, false}), "one process: 1 → 5")
	assert.Equal(t, 7.0, increase(scrapes, []bool{false, false, true}), "restarted before the last scrape: 1 → 3, then 0 → 5")
}

func TestOverheadIsTheScrapesPerTransferPlusTheInstrumentation(t *testing.T) {
	t.Parallel()
	o := &MetricsOverhead{PipelineUS: 1000, InstrumentationNS: 1000, Scrapes: []ScrapeCost{
		{Service: "wallet", Condition: "as left", ServiceUS: 2000, DatabaseUS: 1000},
		{Service: "gl", Condition: "as left", ServiceUS: 2000, DatabaseUS: 1000},
		{Service: "wallet", Condition: "analyzed", ServiceUS: 999999},
	}}
	at := overheadAt(o, "as left", map[string]*Phase{"closed": {APIRate: 100}}, []time.Duration{15 * time.Second})
	require.Len(t, at, 1)
	// 6000 µs a round of scrapes, every 15 s, at 100 transfers/s: 4 µs per transfer of 1000.
	assert.Equal(t, 4.0, at[0].ScrapeUS)
	assert.Equal(t, 0.4, at[0].ScrapePercent)
	assert.Equal(t, 0.1, at[0].InstrPercent, "1 µs of 1000")
	assert.Equal(t, 0.5, at[0].TotalPercent)
	assert.True(t, at[0].WithinTarget)
}

// When the outbox collector cannot read the database, the whole scrape fails (HTTP 500, as
// docs/operations.md says); the section says which collector and why.
func TestAFailedCollectorIsReportedWithItsReason(t *testing.T) {
	t.Parallel()
	m := metrics.New("gl")
	m.Sample(func(context.Context) (metrics.OutboxSample, error) {
		return metrics.OutboxSample{}, errors.New("count open outbox rows: context deadline exceeded")
	})
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	s := newScraper([]scrapeTarget{{service: "gl", url: srv.URL + "/metrics"}}, time.Hour)
	s.scrapeAll(context.Background())
	sec := s.section()
	require.Equal(t, 1, sec.Scrapes[0].Failed)
	assert.Contains(t, sec.Scrapes[0].Errors[0], "500 Internal Server Error")
	assert.Contains(t, sec.Scrapes[0].Errors[0], "count open outbox rows: context deadline exceeded")
	assert.Equal(t, "absent at every scrape", movementOf(t, sec, "gl", "walletgl_consumer_processed_total").Verdict,
		"nothing is judged from a failed scrape")
}
