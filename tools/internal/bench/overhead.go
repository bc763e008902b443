package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/db"
)

// What the metrics cost: a scrape's CPU in each service and in the PostgreSQL backends of its
// database (the outbox collector reads it at every scrape), measured with back-to-back scrapes
// against a window of the same length without any; and the instrumentation's CPU per transfer,
// from the Go benchmark of internal/metrics. Both are set against the pipeline's CPU per
// transfer of the closed loop, at a production interval (15 s) and at the bench's own.

// overheadScrapes is how many back-to-back scrapes of a service one measurement makes: enough
// that /proc's 10 ms ticks are a small part of the total.
const overheadScrapes = 300

// overheadWindow bounds one measurement's back-to-back scrapes in time: a scrape whose query
// runs in parallel takes a hundred milliseconds and more on the shared machine.
const overheadWindow = 15 * time.Second

// productionInterval is a Prometheus's usual scrape interval.
const productionInterval = 15 * time.Second

// instrumentationBench is the Go benchmark of every observation one transfer causes.
const instrumentationBench = "BenchmarkPerTransfer"

// instrumentationCommand runs it; its cpu-ns/op is what the report quotes.
func instrumentationCommand() []string {
	return []string{"go", "test", "-run", "^$", "-bench", "^" + instrumentationBench + "$",
		"-benchtime", "200000x", "-count", "3", "walletgl/internal/metrics"}
}

// MetricsOverhead is what the metrics cost, per scrape and per transfer.
type MetricsOverhead struct {
	Scrapes []ScrapeCost `json:"scrape_cost"`
	// InstrumentationNS is BenchmarkPerTransfer's CPU per transfer (the least of its runs), in ns.
	InstrumentationNS  float64 `json:"instrumentation_cpu_ns_per_transfer"`
	InstrumentationCmd string  `json:"instrumentation_command"`
	// PipelineUS is the closed loop's CPU per transfer of the services, the broker and both
	// databases' backends (the load generator left out).
	PipelineUS float64      `json:"pipeline_cpu_us_per_transfer"`
	At         []OverheadAt `json:"at"`
	Notes      []string     `json:"notes,omitempty"`
}

// ScrapeCost is one service's CPU per scrape, in the process and in its database's backends.
type ScrapeCost struct {
	Service    string  `json:"service"`
	Condition  string  `json:"condition"` // the outbox's statistics: as the run left them, or analyzed
	Scrapes    int     `json:"scrapes"`   // back to back
	ServiceUS  float64 `json:"service_cpu_us"`
	DatabaseUS float64 `json:"database_cpu_us"`
	WallMS     float64 `json:"wall_ms"` // a scrape's duration, seen by the scraper
	Bytes      int     `json:"bytes"`   // of one exposition
}

// OverheadAt is the metrics' share of the pipeline's CPU at one scrape interval and rate.
type OverheadAt struct {
	Interval        string  `json:"interval"`
	Rate            float64 `json:"transfers_per_second"`
	Phase           string  `json:"phase"`
	ScrapeUS        float64 `json:"scrape_cpu_us_per_transfer"`
	ScrapePercent   float64 `json:"scrape_percent"`
	InstrPercent    float64 `json:"instrumentation_percent"`
	TotalPercent    float64 `json:"total_percent"`
	WithinTarget    bool    `json:"within_3_percent"`
	InstrumentKnown bool    `json:"instrumentation_measured"`
}

// measureScrapeCost times n (at most overheadWindow of) back-to-back scrapes of t against an idle window as long, and
// returns the CPU one scrape costs the service (proc) and its database's backends (dbLabel).
func measureScrapeCost(ctx context.Context, s *scraper, meter *cpuMeter, t scrapeTarget, proc, dbLabel string, n int) (ScrapeCost, error) {
	cost := ScrapeCost{Service: t.service}
	size, err := expositionSize(ctx, s, t)
	if err != nil {
		return cost, err
	}
	cost.Bytes = size
	before := meter.snapshot(ctx)
	deadline := time.Now().Add(overheadWindow)
	for cost.Scrapes < n && time.Now().Before(deadline) {
		if _, err := s.fetch(ctx, t); err != nil {
			return cost, fmt.Errorf("measure scrape cost: %w", err)
		}
		cost.Scrapes++
	}
	n = cost.Scrapes
	after := meter.snapshot(ctx)
	wall := after.at.Sub(before.at)
	idleStart := meter.snapshot(ctx)
	select {
	case <-ctx.Done():
		return cost, ctx.Err()
	case <-time.After(wall):
	}
	idleEnd := meter.snapshot(ctx)
	ratio := wall.Seconds() / idleEnd.at.Sub(idleStart.at).Seconds()
	perScrape := func(name string) float64 {
		busy := after.seconds[name] - before.seconds[name]
		idle := (idleEnd.seconds[name] - idleStart.seconds[name]) * ratio
		return round(max(busy-idle, 0)/float64(n)*1e6, 1)
	}
	cost.ServiceUS, cost.DatabaseUS = perScrape(proc), perScrape(dbLabel)
	cost.WallMS = round(wall.Seconds()/float64(n)*1e3, 2)
	return cost, nil
}

// expositionSize is the size in bytes of one scrape of t.
func expositionSize(ctx context.Context, s *scraper, t scrapeTarget) (int, error) {
	body, _, err := s.raw(ctx, t)
	return len(body), err
}

// instrumentationCost runs the Go benchmark of a transfer's observations and returns its least
// cpu-ns/op over the runs (the least disturbed by other work on the machine).
func instrumentationCost(ctx context.Context) (float64, error) {
	args := instrumentationCommand()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("run %s: %w: %s%s", instrumentationBench, err, out, stderr.Bytes())
	}
	return parseCPUPerOp(string(out), instrumentationBench)
}

// parseCPUPerOp reads the least cpu-ns/op of the lines of benchmark name in go test's output.
func parseCPUPerOp(out, name string) (float64, error) {
	best := 0.0
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || (fields[0] != name && !strings.HasPrefix(fields[0], name+"-")) {
			continue
		}
		for i := 1; i < len(fields); i++ {
			if fields[i] != "cpu-ns/op" {
				continue
			}
			v, err := strconv.ParseFloat(fields[i-1], 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s cpu-ns/op %q: %w", name, fields[i-1], err)
			}
			if best == 0 || v < best {
				best = v
			}
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("no cpu-ns/op of %s in:\n%s", name, out)
	}
	return best, nil
}

// pipelineCPU is the CPU per transfer of a phase, the load generator left out.
func pipelineCPU(c CPUUse) float64 {
	var sum float64
	for _, p := range c.Processes {
		if !strings.HasPrefix(p.Name, "harness") {
			sum += p.PerEventUS
		}
	}
	return sum
}

// overheadAt sets the scrape costs measured in condition and the instrumentation's cost against the pipeline's CPU per
// transfer at each interval and each load phase's rate.
func overheadAt(o *MetricsOverhead, condition string, phases map[string]*Phase, intervals []time.Duration) []OverheadAt {
	var perScrape float64 // all services, per round of scrapes
	for _, c := range o.Scrapes {
		if c.Condition == condition {
			perScrape += c.ServiceUS + c.DatabaseUS
		}
	}
	var out []OverheadAt
	for _, iv := range intervals {
		for _, name := range []string{"closed", "open"} {
			ph := phases[name]
			if ph == nil || ph.APIRate <= 0 || o.PipelineUS <= 0 {
				continue
			}
			a := OverheadAt{Interval: iv.String(), Rate: ph.APIRate, Phase: name, InstrumentKnown: o.InstrumentationNS > 0}
			a.ScrapeUS = round(perScrape/iv.Seconds()/ph.APIRate, 3)
			a.ScrapePercent = round(a.ScrapeUS/o.PipelineUS*100, 3)
			a.InstrPercent = round(o.InstrumentationNS/1000/o.PipelineUS*100, 3)
			a.TotalPercent = round(a.ScrapePercent+a.InstrPercent, 3)
			a.WithinTarget = a.TotalPercent < 3
			out = append(out, a)
		}
	}
	return out
}

// QueryPlan is the plan of one query a scrape runs, on the run's database at its end.
type QueryPlan struct {
	Service  string   `json:"service"`
	Query    string   `json:"query"`
	Scans    []string `json:"scans"`     // each scan node: type, relation, index
	SeqScans []string `json:"seq_scans"` // sequential scans of outbox or inbox
	ExecMS   float64  `json:"execution_ms"`
	// Workers is the parallel workers the query started: processes that exit before the CPU
	// meter reads them, so a parallel scrape's database CPU is a lower bound.
	Workers   int    `json:"parallel_workers_launched"`
	Condition string `json:"condition"`
	Analyzed  bool   `json:"outbox_analyzed"`   // the outbox has statistics (ANALYZE or autovacuum ran)
	Rows      int64  `json:"outbox_rows"`       // the table's rows, every status
	Acked     int64  `json:"acknowledged_rows"` // of them acknowledged: what retention keeps
}

// scrapeQueries are the queries the outbox collector runs at every scrape (events.Admin.OutboxOpen).
var scrapeQueries = []string{"OutboxOpen"}

// explainScrapeQueries runs EXPLAIN ANALYZE of each scrape query on pool, as the service's
// pool would run it.
func explainScrapeQueries(ctx context.Context, service string, pool *pgxpool.Pool) ([]QueryPlan, error) {
	queries, err := ParseQueries(db.Queries(), "events")
	if err != nil {
		return nil, fmt.Errorf("read scrape queries: %w", err)
	}
	var rows, acked int64
	if err := pool.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE status = 'acknowledged') FROM outbox").Scan(&rows, &acked); err != nil {
		return nil, fmt.Errorf("count %s outbox: %w", service, err)
	}
	var analyzed bool
	if err := pool.QueryRow(ctx, `SELECT coalesce(last_analyze, last_autoanalyze) IS NOT NULL
		FROM pg_stat_user_tables WHERE relname = 'outbox'`).Scan(&analyzed); err != nil {
		return nil, fmt.Errorf("read %s outbox statistics: %w", service, err)
	}
	var plans []QueryPlan
	for _, name := range scrapeQueries {
		q, ok := queries[name]
		if !ok {
			return nil, fmt.Errorf("query %s not in db/queries/events", name)
		}
		var raw []byte
		if err := pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.SQL).Scan(&raw); err != nil {
			return nil, fmt.Errorf("explain %s on %s: %w", name, service, err)
		}
		p, err := readPlan(raw)
		if err != nil {
			return nil, fmt.Errorf("explain %s on %s: %w", name, service, err)
		}
		p.Service, p.Query, p.Rows, p.Acked, p.Analyzed = service, name, rows, acked, analyzed
		plans = append(plans, p)
	}
	return plans, nil
}

// planNode is the part of a node of EXPLAIN's JSON that the check reads.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	Plans        []planNode `json:"Plans"`
	Workers      int        `json:"Workers Launched"`
}

// readPlan lists the scan nodes of an EXPLAIN (FORMAT JSON) and the sequential scans of the
// outbox or the inbox among them.
func readPlan(raw []byte) (QueryPlan, error) {
	var doc []struct {
		Plan          planNode `json:"Plan"`
		ExecutionTime float64  `json:"Execution Time"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc) == 0 {
		return QueryPlan{}, fmt.Errorf("read plan: %v", err)
	}
	p := QueryPlan{ExecMS: round(doc[0].ExecutionTime, 3)}
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.RelationName != "" || n.IndexName != "" {
			scan := strings.Join(strings.Fields(n.NodeType+" "+n.RelationName), " ")
			if n.IndexName != "" {
				scan += " using " + n.IndexName
			}
			p.Scans = append(p.Scans, scan)
			if n.NodeType == "Seq Scan" && (n.RelationName == "outbox" || n.RelationName == "inbox") {
				p.SeqScans = append(p.SeqScans, scan)
			}
		}
		p.Workers += n.Workers
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(doc[0].Plan)
	return p, nil
}

// measureMetrics completes the Metrics section after the run's last scrape: the plans of the
// queries a scrape runs and the CPU a scrape costs each service, as the run left the outbox
// and, when those plans ran in parallel for want of statistics, again after ANALYZE (what
// autovacuum would have done); then the instrumentation's cost per transfer and the share of
// the pipeline's CPU. Whatever cannot be measured becomes a note; the run never fails for it.
func measureMetrics(ctx context.Context, sys *system, meter *cpuMeter, s *scraper, rep *Report, out io.Writer) *MetricsSection {
	sec := s.section()
	fmt.Fprintf(out, "metrics: collector query plans, scrape cost (%d back-to-back scrapes per service, at most %s), %s …\n",
		overheadScrapes, overheadWindow, instrumentationBench)
	if err := sys.waitAcknowledged(ctx, time.Minute); err != nil {
		sec.Notes = append(sec.Notes, "the scrape cost was measured while the pipeline was still busy: "+err.Error())
	}
	o := &MetricsOverhead{InstrumentationCmd: strings.Join(instrumentationCommand(), " ")}
	sec.Overhead = o
	const asLeft, analyzed = "as the run left the outbox", "after ANALYZE outbox"
	parallel := measureCondition(ctx, sys, meter, s, sec, asLeft)
	if parallel {
		for _, pool := range []*pgxpool.Pool{sys.walletDB, sys.glDB} {
			if _, err := pool.Exec(ctx, "ANALYZE outbox"); err != nil {
				sec.Notes = append(sec.Notes, fmt.Sprintf("analyze outbox: %v", err))
			}
		}
		measureCondition(ctx, sys, meter, s, sec, analyzed)
	}
	if ns, err := instrumentationCost(ctx); err != nil {
		o.Notes = append(o.Notes, "instrumentation cost not measured: "+firstLine(err.Error()))
	} else {
		o.InstrumentationNS = ns
	}
	if rep.Closed != nil {
		o.PipelineUS = round(pipelineCPU(rep.Closed.CPU), 1)
	}
	o.At = overheadAt(o, asLeft, map[string]*Phase{"closed": rep.Closed, "open": rep.Open}, []time.Duration{productionInterval, s.interval})
	return sec
}

// measureCondition explains the scrape queries on both databases and measures a scrape's cost
// of each service in the outbox's present condition; it says whether a plan ran in parallel.
func measureCondition(ctx context.Context, sys *system, meter *cpuMeter, s *scraper, sec *MetricsSection, condition string) (parallel bool) {
	for _, db := range []struct {
		service string
		pool    *pgxpool.Pool
	}{{"wallet", sys.walletDB}, {"gl", sys.glDB}} {
		plans, err := explainScrapeQueries(ctx, db.service, db.pool)
		if err != nil {
			sec.Notes = append(sec.Notes, err.Error())
			continue
		}
		for _, p := range plans {
			p.Condition = condition
			parallel = parallel || p.Workers > 0
			sec.Plans = append(sec.Plans, p)
		}
	}
	procs := map[string][2]string{
		"wallet": {"wallet", "postgres (wallet db backends)"},
		"gl":     {"gl", "postgres (gl db backends)"},
	}
	for _, t := range s.targets {
		c, err := measureScrapeCost(ctx, s, meter, t, procs[t.service][0], procs[t.service][1], overheadScrapes)
		if err != nil {
			sec.Overhead.Notes = append(sec.Overhead.Notes, err.Error())
			continue
		}
		c.Condition = condition
		sec.Overhead.Scrapes = append(sec.Overhead.Scrapes, c)
	}
	return parallel
}
