// Package bench is the benchmark harness (`make bench`): it starts its own databases, its own
// JetStream server and the two services as processes, drives the wallet API closed-loop and
// open-loop, measures throughput, latencies from the databases' own timestamps, the backlog
// drain, CPU and memory, and measures in the same run the machine's limit for the same SQL with
// pgbench, so that the figures are read as ratios on a noisy machine.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"walletgl/db"
	"walletgl/internal/database"
	"walletgl/internal/events/contract"
	"walletgl/internal/systemtest"
	"walletgl/internal/wallet"
	"walletgl/internal/wallet/postgres"
)

// Options size a run.
type Options struct {
	DatabaseURL   string        // a PostgreSQL server's maintenance database
	Clients       int           // closed loop: concurrent clients (and pgbench's concurrency)
	Duration      time.Duration // closed loop's length
	Warmup        time.Duration // the start of the closed loop left out of the steady state
	Rate          float64       // open loop: transfers per second (0: half the sustained rate)
	OpenDuration  time.Duration // open loop's length
	Users         int           // user wallets
	Backlog       int           // outbox rows of the drain measurement (0: skip it)
	ScaleLines    int           // the GL's reads timed at 100k lines and at this many (0: skip the scale phase)
	Replay        bool          // time gl replay of the stream after the backlog phase
	PeerWatermill bool          // drain the backlog's rows with Watermill's forwarder (peers/watermill)
	DrainTimeout  time.Duration // how long the drain is watched; a partial drain is reported as such
	PgbenchTime   time.Duration // each pgbench run's length
	Pgbench       string        // the pgbench binary ("" or missing: limits not measured)
	GLBatch       int           // events per GL transaction in the pgbench script (the consumer's batch)
	Quick         bool          // the quick form, said in the report
	Keep          bool          // keep databases and logs
	// ServiceProcs is both services' GOMAXPROCS (0: Go's default, one per core). The bench runs
	// them with 1, as a one-CPU container limit would: on a box they share with both databases
	// and the broker, a backlog event costs 7% less of the machine's CPU (docs/bench.md).
	ServiceProcs  int
	WalletEnv     []string // settings added to the wallet's environment
	GLEnv         []string // settings added to the GL's environment
	TTY           bool     // progress rewritten in place
	WorkDir       string   // logs, scripts and broker store (default: a new temp dir)
	ResultsDir    string   // where the report goes ("" : not written)
	Plot          bool     // write a PNG of latency over time
	NATSServerBin string   // a nats-server to use instead of building one
}

// Default is `make bench`: about three minutes.
func Default(dbURL string) Options {
	return Options{
		DatabaseURL: dbURL, Clients: 16, Duration: 40 * time.Second, Warmup: 8 * time.Second,
		OpenDuration: 20 * time.Second, Users: 1000, Backlog: 100_000, DrainTimeout: 75 * time.Second, PgbenchTime: 10 * time.Second,
		Pgbench: "pgbench", GLBatch: 100, ScaleLines: 10_000_000, Replay: true, PeerWatermill: true, ServiceProcs: 1,
	}
}

// Quick is `make bench ARGS=-quick`: about a minute, with a backlog of 20k instead of 100k.
func Quick(dbURL string) Options {
	o := Default(dbURL)
	o.Duration, o.Warmup, o.OpenDuration, o.PgbenchTime, o.Quick = 12*time.Second, 3*time.Second, 8*time.Second, 5*time.Second, true
	o.Backlog, o.DrainTimeout = 20_000, 25*time.Second
	o.ScaleLines, o.PeerWatermill = 1_000_000, false
	return o
}

// Run runs the whole benchmark and returns its report; progress goes to out.
func Run(ctx context.Context, opts Options, out io.Writer) (rep *Report, err error) {
	started := time.Now()
	runID := "bench_" + started.Format("20060102_150405") + fmt.Sprintf("_%d", os.Getpid())
	rep = &Report{RunID: runID, Started: started, Options: opts, Cores: runtime.NumCPU()}
	dir := opts.WorkDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "bench-"); err != nil {
			return rep, err
		}
	}
	rep.WorkDir = dir
	rep.Host = hostInfo(ctx, opts)

	fmt.Fprintln(out, "building wallet, gl and nats-server …")
	bins, err := systemtest.Build(ctx, dir)
	if err != nil {
		return rep, err
	}
	natsBin := opts.NATSServerBin
	if natsBin == "" {
		if natsBin, err = systemtest.NATSServerBinary(ctx, dir); err != nil {
			return rep, err
		}
	}
	rep.Host.NATSServer = natsServerVersion(ctx, natsBin)

	sys, err := startSystem(ctx, opts, runID, dir, bins, natsBin)
	defer func() {
		cleanup := context.WithoutCancel(ctx)
		for _, e := range sys.stop() {
			rep.Notes = append(rep.Notes, "shutdown: "+firstLine(e.Error()))
		}
		if !opts.Keep {
			sys.dropDatabases(cleanup)
			if sys.admin != nil {
				sys.admin.Close()
			}
			if opts.WorkDir == "" && err == nil {
				_ = os.RemoveAll(dir)
				rep.WorkDir = ""
			}
		} else if sys.admin != nil {
			sys.admin.Close()
		}
		rep.Elapsed = time.Since(started).Round(time.Millisecond).String()
	}()
	if err != nil {
		return rep, fmt.Errorf("start system: %w", err)
	}
	fmt.Fprintf(out, "system up: wallet %s, gl %s, nats %s, databases %s, %s\n",
		sys.wallet.Addr, sys.gl.Addr, sys.broker.URL(), sys.walletDBName, sys.glDBName)

	// Scraped from the start to the end of the run, as a Prometheus would.
	scr := newScraper(sys.scrapeTargets(), ScrapeInterval)
	stopScraping := scr.start(ctx)
	defer stopScraping()
	sys.onRestart = scr.scrapeAll

	key, err := sys.wallet.CreateKey(ctx, "admin")
	if err != nil {
		return rep, fmt.Errorf("create an API key: %w", err)
	}
	client := systemtest.NewClient(sys.wallet.Addr)
	client.Key = key
	fmt.Fprintf(out, "creating and funding %d wallets …\n", opts.Users)
	if err := setupWallets(ctx, client, opts.Users); err != nil {
		return rep, fmt.Errorf("create wallets: %w", err)
	}
	if _, err := sys.waitQuiet(ctx, time.Minute); err != nil {
		return rep, fmt.Errorf("funding transfers: %w", err)
	}

	// The limit first, with the services idle: pgbench on the same server and the same SQL.
	rep.Limits = measureLimits(ctx, opts, runID, dir, out)

	meter := &cpuMeter{procs: sys.pids, admin: sys.admin, dbNames: map[string]string{
		"postgres (wallet db backends)": sys.walletDBName, "postgres (gl db backends)": sys.glDBName,
	}}
	gen := newLoadGen(sys.wallet.Addr, key, opts.Users, runID, started, opts.Clients)
	defer gen.close()

	settle(ctx, sys, rep, out)
	// Closed loop: the API's throughput, and whether the pipeline keeps up with it.
	fmt.Fprintf(out, "closed loop: %d clients for %s …\n", opts.Clients, opts.Duration)
	closed, err := runPhase(ctx, sys, meter, gen, out, opts, phaseSpec{mode: "closed", clients: opts.Clients, d: opts.Duration})
	if err != nil {
		return rep, err
	}
	rep.Closed = closed

	// Open loop at half the sustained rate: the latency of a pipeline that is not saturated.
	rate := opts.Rate
	if rate <= 0 {
		sustained := min(closed.Steady.EntryRate, closed.APIRate)
		rate = max(sustained/2, 1)
	}
	settle(ctx, sys, rep, out)
	fmt.Fprintf(out, "open loop: %.0f transfers/s for %s …\n", rate, opts.OpenDuration)
	open, err := runPhase(ctx, sys, meter, gen, out, opts, phaseSpec{mode: "open", rate: rate, d: opts.OpenDuration})
	if err != nil {
		return rep, err
	}
	rep.Open = open
	for _, p := range []string{"wallet", "gl", "nats-server"} {
		pid := sys.pids()[p]
		if rss, peak, err := memory(pid); err == nil {
			rep.Memory = append(rep.Memory, Memory{Name: p, RSSMiB: rss, PeakMiB: peak})
		}
	}

	// The wallet alone, as pgbench runs its transaction alone: the GL stopped, then timed
	// catching up on what it missed.
	fmt.Fprintf(out, "wallet alone: the GL stopped, %d clients for %s …\n", opts.Clients, opts.Duration)
	alone, err := measureWalletAlone(ctx, sys, meter, gen, out, opts)
	if err != nil {
		return rep, err
	}
	rep.Alone = alone

	if opts.Backlog > 0 {
		fmt.Fprintf(out, "backlog: %d outbox rows with the wallet stopped, then the wallet started …\n", opts.Backlog)
		drain, err := measureDrain(ctx, sys, meter, opts.Backlog, opts.DrainTimeout, out, opts.TTY)
		if err != nil {
			return rep, err
		}
		rep.Drain = drain
		// The stream now holds every event of the run: the rebuild's rate (target 5).
		if opts.Replay {
			// A partial drain leaves the GL posting: the replay would share the machine with it.
			if err := sys.waitAcknowledged(ctx, 3*time.Minute); err != nil {
				rep.Notes = append(rep.Notes, "replay: started before the backlog was posted: "+err.Error())
			}
			fmt.Fprintln(out, "replay: gl replay --from-start of the wallet's stream into a new database …")
			rep.Replay = measureReplay(ctx, sys, opts, runID, out)
		}
		// Another forwarder on the same rows (target 2).
		if opts.PeerWatermill {
			rep.Peer = measureWatermill(ctx, opts, runID, sys.broker.URL(), opts.Backlog, out)
		}
	}
	stopScraping() // the last scrape: the end of the run
	rep.Metrics = measureMetrics(ctx, sys, meter, scr, rep, out)
	if opts.ScaleLines > 0 {
		// Last, with the services idle: the load would be in the other phases' CPU figures.
		sc, err := measureScale(ctx, opts, runID, out)
		if err != nil {
			sc = &Scale{Error: firstLine(err.Error())}
			fmt.Fprintln(out, "  scale:", err)
		}
		rep.Scale = sc
	}
	rep.Targets = targets(rep)
	return rep, nil
}

// settle has the run's writes so far on disk before a latency is measured (system.settle),
// saying how long it took; a failure is a note of the report.
func settle(ctx context.Context, sys *system, rep *Report, out io.Writer) {
	took, err := sys.settle(ctx)
	if err != nil {
		rep.Notes = append(rep.Notes, "settle: "+firstLine(err.Error()))
		fmt.Fprintf(out, "settle: %v\n", err)
		return
	}
	fmt.Fprintf(out, "settled: CHECKPOINT and sync in %s\n", took.Round(time.Millisecond))
}

type phaseSpec struct {
	mode    string // closed or open
	clients int
	rate    float64
	d       time.Duration
}

func runPhase(ctx context.Context, sys *system, meter *cpuMeter, gen *loadGen, out io.Writer, opts Options, spec phaseSpec) (*Phase, error) {
	gen.resetCounters()
	var last atomic.Pointer[Sample]
	var samples []Sample
	phaseStart := time.Now()
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			tr, en, err := sys.countsSince(sampleCtx, phaseStart)
			if err == nil {
				s := Sample{At: time.Since(phaseStart), Transfers: tr, Entries: en}
				samples = append(samples, s)
				last.Store(&s)
			}
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
			}
		}
	}()
	stopProgress := progress(ctx, out, opts.TTY, func() string {
		el := time.Since(phaseStart).Seconds()
		lag := "?"
		if s := last.Load(); s != nil {
			lag = fmt.Sprint(s.Lag())
		}
		return fmt.Sprintf("%-6s %5.1fs/%s  sent %7d  ok %7d  errors %4d  %6.0f/s  lag %s",
			spec.mode, el, spec.d, gen.sent.Load(), gen.ok.Load(), gen.failed.Load(), float64(gen.ok.Load())/el, lag)
	})
	before := meter.snapshot(ctx)
	var (
		reqs    []request
		skipped int64
	)
	if spec.mode == "closed" {
		reqs = gen.closedLoop(ctx, spec.clients, spec.d)
	} else {
		reqs, skipped = gen.openLoop(ctx, spec.rate, spec.d)
	}
	loadEnd := time.Now()
	after := meter.snapshot(ctx)
	stopProgress()
	// Keep sampling while the pipeline drains: the samples show the lag going back to zero.
	drainTime, quietErr := sys.waitQuiet(ctx, 3*time.Minute)
	stopSampling()
	<-sampled
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	ph := &Phase{Mode: spec.mode, Clients: spec.clients, TargetRate: round(spec.rate, 1),
		Seconds: round(loadEnd.Sub(phaseStart).Seconds(), 2), Skipped: skipped, Samples: samples,
		DrainAfterLoad: drainTime.Round(time.Millisecond).String(), Statuses: map[string]int{}}
	if quietErr != nil {
		ph.Notes = append(ph.Notes, quietErr.Error())
	}
	var lat []time.Duration
	for _, r := range reqs {
		ph.Statuses[fmt.Sprint(r.Status)]++
		if r.Status == 201 {
			ph.OK++
			lat = append(lat, r.Latency)
		} else {
			ph.Errors++
		}
	}
	ph.Requests = reqs
	ph.APIRate = round(float64(ph.OK)/ph.Seconds, 1)
	ph.API = Summarize(lat)
	var loadSamples []Sample
	for _, s := range samples {
		if s.At <= loadEnd.Sub(phaseStart) {
			loadSamples = append(loadSamples, s)
		}
	}
	warm := opts.Warmup
	if spec.mode == "open" {
		warm = spec.d / 5
	}
	ph.Steady = SteadyState(loadSamples, warm)
	ph.CPU = diffCPU(before, after, int64(ph.OK), []string{"wallet", "gl", "nats-server",
		"postgres (wallet db backends)", "postgres (gl db backends)", "harness (load generator)"})

	times, err := sys.pipelineTimes(ctx, phaseStart, loadEnd.Add(time.Second))
	if err != nil {
		return nil, err
	}
	var posted, acked, dispatched, claimed []time.Duration
	for _, tt := range times {
		if tt.posted.IsZero() {
			ph.Unposted++
			continue
		}
		posted = append(posted, tt.posted.Sub(tt.created))
		claimed = append(claimed, tt.claimed.Sub(tt.created))
		if !tt.dispatched.IsZero() {
			dispatched = append(dispatched, tt.dispatched.Sub(tt.created))
		}
		ph.Points = append(ph.Points, Point{At: tt.created.Sub(gen.start), Latency: tt.posted.Sub(tt.created)})
		if !tt.acked.IsZero() {
			acked = append(acked, tt.acked.Sub(tt.created))
		}
	}
	ph.CommitToPosted = Summarize(posted)
	ph.CommitToAcked = Summarize(acked)
	ph.CommitToDispatched = Summarize(dispatched)
	ph.CommitToClaimed = Summarize(claimed)
	fmt.Fprintf(out, "  %s: %d ok, %d errors, %.0f/s; API p50 %.1f ms p99 %.1f ms; posted p50 %.1f ms p99 %.1f ms; GL %.0f entries/s, lag slope %+.1f/s; drained %s after the load\n",
		spec.mode, ph.OK, ph.Errors, ph.APIRate, ph.API.P50, ph.API.P99, ph.CommitToPosted.P50, ph.CommitToPosted.P99,
		ph.Steady.EntryRate, ph.Steady.LagSlope, ph.DrainAfterLoad)
	return ph, nil
}

// measureLimits runs pgbench with the services' SQL against scratch copies of the schemas.
func measureLimits(ctx context.Context, opts Options, runID, dir string, out io.Writer) Limits {
	var lim Limits
	bin, err := exec.LookPath(opts.Pgbench)
	if opts.Pgbench == "" || err != nil {
		lim.Error = fmt.Sprintf("pgbench not found (%q): limits not measured", opts.Pgbench)
		fmt.Fprintln(out, lim.Error)
		return lim
	}
	walletPayload := sampleTransferCompleted()
	walletScript, err := WalletScript(db.Queries(), opts.Users, walletPayload)
	if err != nil {
		lim.Error = err.Error()
		return lim
	}
	glScript, err := GLScript(db.Queries(), opts.GLBatch, sampleAcknowledgment(opts.GLBatch))
	if err != nil {
		lim.Error = err.Error()
		return lim
	}
	relayScript, err := RelayScript(db.Queries(), RelayBatch)
	if err != nil {
		lim.Error = err.Error()
		return lim
	}
	walletURL, _ := systemtest.DatabaseURL(opts.DatabaseURL, runID+"_pgbench_wallet")
	glURL, _ := systemtest.DatabaseURL(opts.DatabaseURL, runID+"_pgbench_gl")
	defer func() {
		if !opts.Keep {
			_ = database.Drop(context.WithoutCancel(ctx), walletURL)
			_ = database.Drop(context.WithoutCancel(ctx), glURL)
		}
	}()
	if err := scratchDatabase(ctx, walletURL, "wallet", opts.Users); err != nil {
		lim.Error = err.Error()
		return lim
	}
	if err := scratchDatabase(ctx, glURL, "gl", 0); err != nil {
		lim.Error = err.Error()
		return lim
	}
	fmt.Fprintf(out, "pgbench (the limit): wallet transaction at %d clients (prepared, then unnamed as the services send it), GL batch of %d at %d and 2 clients, relay claim+mark of %d at 1 and 2 clients, %s each …\n",
		opts.Clients, opts.GLBatch, opts.Clients, RelayBatch, opts.PgbenchTime)
	lim.Wallet = runPgbench(ctx, bin, dir, walletURL, walletScript, opts.Clients, opts.PgbenchTime)
	lim.WalletUnnamed = runPgbenchWith(ctx, bin, dir, walletURL, ProtocolUnnamed, walletScript, opts.Clients, opts.PgbenchTime)
	lim.GL = runPgbench(ctx, bin, dir, glURL, glScript, opts.Clients, opts.PgbenchTime)
	lim.GLTwoClients = runPgbench(ctx, bin, dir, glURL, glScript, 2, opts.PgbenchTime)
	// The relay's rounds run on the wallet's scratch database, its outbox filled anew for each.
	lim.Relay = runRelayPgbench(ctx, bin, dir, walletURL, relayScript, 1, opts.PgbenchTime, walletPayload)
	lim.RelayTwoClients = runRelayPgbench(ctx, bin, dir, walletURL, relayScript, 2, opts.PgbenchTime, walletPayload)
	for _, r := range []PgbenchResult{lim.Wallet, lim.GL, lim.GLTwoClients, lim.Relay, lim.RelayTwoClients} {
		fmt.Fprintf(out, "  %-20s c=%-3d %8.1f tps  %8.1f %s/s  avg %.2f ms  %s\n",
			r.Script, r.Clients, r.TPS, r.EventsPerSec, r.Unit, r.LatencyAvgMS, strings.TrimSpace(r.Note+" "+r.Error))
	}
	return lim
}

// RelayBatch is the relay's batch size (events.RelayConfig.BatchSize's default), the rows one
// round of the relay script claims and marks.
const RelayBatch = 100

// relayFillRate is the rows per second of a relay run that its outbox is filled for: above what
// the script reaches on the 2-core machine, so that the rows normally last the whole run.
const relayFillRate = 60_000

// runRelayPgbench fills the outbox at dbURL with pending rows for a run of d, runs the relay
// script and counts the rows it marked dispatched: rows/s is pgbench's rounds/s × the rows a
// completed round marked on average. A run that emptied the outbox says so in its note.
func runRelayPgbench(ctx context.Context, bin, dir, dbURL string, s Script, clients int, d time.Duration, payload string) PgbenchResult {
	rows := relayFillRate * max(int(d.Seconds()), 1)
	pool, err := database.Open(ctx, dbURL, 1)
	if err != nil {
		return PgbenchResult{Script: s.Name, Clients: clients, Unit: s.Unit, Error: err.Error()}
	}
	defer pool.Close()
	if err := fillOutbox(ctx, pool, rows, payload); err != nil {
		return PgbenchResult{Script: s.Name, Clients: clients, Unit: s.Unit, Error: fmt.Sprintf("fill outbox: %v", err)}
	}
	res := runPgbench(ctx, bin, dir, dbURL, s, clients, d)
	if res.Error != "" {
		return res
	}
	var dispatched, due int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'dispatched'), count(*) FILTER (WHERE status = 'pending')
		FROM outbox`).Scan(&dispatched, &due); err != nil {
		res.Error = fmt.Sprintf("count outbox rows: %v", err)
		return res
	}
	if res.Transactions > 0 {
		res.EventsPerSec = round(res.TPS*float64(dispatched)/float64(res.Transactions), 1)
	}
	if dispatched > 0 && res.MachineCPUSeconds > 0 { // per row marked, not per row a round asks for
		res.MachinePerUnitUS = round(res.MachineCPUSeconds/float64(dispatched)*1e6, 1)
	}
	if due == 0 {
		res.Note = fmt.Sprintf("the %d pre-filled rows ran out: a lower bound (and the CPU per row an upper one)", rows)
	}
	return res
}

// fillOutbox empties the outbox and writes n pending rows with the sample payload in one
// statement, their ids in insertion order like the services' UUIDv7 ids, then vacuums it so that
// every run starts from the same table.
func fillOutbox(ctx context.Context, pool *pgxpool.Pool, n int, payload string) error {
	if _, err := pool.Exec(ctx, "TRUNCATE outbox"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `INSERT INTO outbox (id, event_type, aggregate_id, payload)
		SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, $1, md5('t' || g)::uuid::text, $2::jsonb
		FROM generate_series(1, $3::int) AS g`, contract.TypeTransferCompleted, payload, n); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, "VACUUM ANALYZE outbox")
	return err
}

// scratchDatabase creates and migrates a database like the service's; the wallet's gets users
// u1…u<users> that may go negative (the script moves money without the service's checks).
// runDatabase creates the run's empty database <runID>_<suffix> (dropping one a crashed run
// left) and returns its URL and what drops it, which -keep makes a no-op.
func runDatabase(ctx context.Context, opts Options, runID, suffix string) (string, func(), error) {
	url, err := systemtest.DatabaseURL(opts.DatabaseURL, runID+"_"+suffix)
	if err != nil {
		return "", nil, err
	}
	_ = database.Drop(ctx, url)
	if err := database.EnsureExists(ctx, url); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", suffix, err)
	}
	drop := func() {
		if !opts.Keep {
			_ = database.Drop(context.WithoutCancel(ctx), url)
		}
	}
	return url, drop, nil
}

func scratchDatabase(ctx context.Context, url, service string, users int) error {
	_ = database.Drop(ctx, url)
	if err := database.EnsureExists(ctx, url); err != nil {
		return err
	}
	pool, err := database.Open(ctx, url, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := database.Migrate(ctx, pool, service); err != nil {
		return err
	}
	store := postgres.NewStore(pool, postgres.Options{})
	for i := 1; i <= users; i++ {
		if _, err := store.CreateWallet(ctx, wallet.Wallet{ID: fmt.Sprintf("u%d", i), Currency: "USD", AllowNegative: true}); err != nil {
			return fmt.Errorf("create scratch wallet: %w", err)
		}
	}
	return nil
}

// sampleTransferCompleted is the envelope of a TransferCompleted.v1 of the size the wallet
// writes, for the pgbench scripts.
func sampleTransferCompleted() string {
	return sampleEnvelope(contract.SourceWallet, contract.TypeTransferCompleted, contract.TransferCompleted{
		TransferID: sampleID, FromWalletID: "u1", ToWalletID: "u2", Amount: 42, Currency: "USD", CreatedAt: time.Now().UTC()})
}

// sampleAcknowledgment is the envelope of a TransferPosted.v2 for a GL batch of n postings.
func sampleAcknowledgment(n int) string {
	posted := contract.TransferPosted{TransferID: sampleID, SourceEventID: sampleID, EntryID: sampleID, PostedAt: time.Now().UTC()}
	return sampleEnvelope(contract.SourceGL, contract.TypeTransferPostedV2,
		contract.TransferPostings{Postings: slices.Repeat([]contract.TransferPosted{posted}, max(n, 1))})
}

// sampleID stands for every id of the sample envelopes.
const sampleID = "0193a5c1-7f00-7000-8000-000000000000"

func sampleEnvelope(source, eventType string, data any) string {
	raw, _ := json.Marshal(data)
	body, _ := json.Marshal(contract.Envelope{SpecVersion: "1.0", ID: sampleID, Source: source, Type: eventType, Subject: sampleID,
		Time: time.Now().UTC(), DataContentType: "application/json", Data: raw})
	return string(body)
}

// measureDrain stops the wallet, writes n outbox rows, starts the wallet and times the relay
// emptying the outbox and the GL posting every event.
func measureDrain(ctx context.Context, sys *system, meter *cpuMeter, n int, timeout time.Duration, out io.Writer, tty bool) (*Drain, error) {
	d := &Drain{Rows: n}
	if rss, peak, err := memory(sys.wallet.PID()); err == nil {
		d.Notes = append(d.Notes, fmt.Sprintf("wallet before the stop: rss %.1f MiB, peak %.1f MiB", rss, peak))
	}
	if err := sys.wallet.Stop(30 * time.Second); err != nil {
		return nil, fmt.Errorf("stop wallet: %w", err)
	}
	writeStart := time.Now()
	if err := writeBacklog(ctx, sys.walletDB, n); err != nil {
		return nil, fmt.Errorf("write backlog: %w", err)
	}
	d.WriteSeconds = round(time.Since(writeStart).Seconds(), 2)
	fmt.Fprintf(out, "  wrote %d rows in %.1fs; starting the wallet\n", n, d.WriteSeconds)

	before := meter.snapshot(ctx)
	t0 := time.Now()
	if err := sys.wallet.Start(); err != nil {
		return nil, err
	}
	defer sys.afterRestart(ctx, sys.wallet)()
	var pending, posted atomic.Int64
	pending.Store(int64(n))
	stop := progress(ctx, out, tty, func() string {
		return fmt.Sprintf("drain  %5.1fs  not dispatched %7d  posted %7d/%d", time.Since(t0).Seconds(), pending.Load(), posted.Load(), n)
	})
	deadline := t0.Add(timeout)
	var dispatchedAt, postedAt time.Time
	polls := 0 // the posted count every fifth poll: it reads every entry posted so far
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var p int64
		if dispatchedAt.IsZero() {
			if err := sys.walletDB.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE status IN ('pending', 'dispatching', 'failed')").Scan(&p); err == nil {
				pending.Store(p)
				if p == 0 {
					dispatchedAt = time.Now()
				}
			}
		}
		if e, err := sys.entriesSince(ctx, t0); err == nil && postedAt.IsZero() && polls%5 == 0 {
			posted.Store(e)
			if e >= int64(n) {
				postedAt = time.Now()
			}
		}
		polls++
		if !dispatchedAt.IsZero() && !postedAt.IsZero() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	after := meter.snapshot(ctx)
	stop()
	if err := sys.wallet.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	d.CPU = diffCPU(before, after, int64(n), []string{"wallet", "gl", "nats-server",
		"postgres (wallet db backends)", "postgres (gl db backends)"})
	// The databases' own times say when the last row was dispatched and the last entry posted.
	var firstDispatched, lastDispatched, lastPosted *time.Time
	_ = sys.walletDB.QueryRow(ctx, "SELECT min(dispatched_at), max(dispatched_at) FROM outbox WHERE created_at >= $1", writeStart).
		Scan(&firstDispatched, &lastDispatched)
	if firstDispatched != nil {
		d.FirstDispatchSeconds = round(firstDispatched.Sub(t0).Seconds(), 3)
	}
	_ = sys.glDB.QueryRow(ctx, "SELECT max(posted_at) FROM journal_entries WHERE posted_at >= $1", t0).Scan(&lastPosted)
	// A drain not finished within the timeout is reported at the rate it had: rows done so far
	// over the time watched.
	watched := after.at.Sub(t0).Seconds()
	// dispatched_at is overwritten when catch-up re-publishes a row whose acknowledgment is
	// late, so the end of the first dispatch is when the poll saw no row left to dispatch.
	_ = sys.walletDB.QueryRow(ctx, "SELECT coalesce(sum(greatest(publish_count - 1, 0)), 0) FROM outbox WHERE created_at >= $1", writeStart).
		Scan(&d.Republished)
	if !dispatchedAt.IsZero() && lastDispatched != nil {
		d.DispatchSeconds = round(dispatchedAt.Sub(t0).Seconds(), 3)
		d.DispatchRate = round(float64(n)/d.DispatchSeconds, 1)
	} else {
		d.Partial, d.DispatchPartial = true, true
		d.DispatchSeconds = round(watched, 3)
		d.DispatchRate = round(float64(int64(n)-pending.Load())/watched, 1)
		d.Notes = append(d.Notes, fmt.Sprintf("not all dispatched within %s: %d left; the rate is of the rows done", timeout, pending.Load()))
	}
	if !postedAt.IsZero() && lastPosted != nil {
		d.PostSeconds = round(lastPosted.Sub(t0).Seconds(), 3)
		d.PostRate = round(float64(n)/d.PostSeconds, 1)
	} else {
		d.Partial, d.PostPartial = true, true
		d.PostSeconds = round(watched, 3)
		d.PostRate = round(float64(posted.Load())/watched, 1)
		d.Notes = append(d.Notes, fmt.Sprintf("not all posted within %s: %d of %d; the rate is of the entries posted", timeout, posted.Load(), n))
	}
	fmt.Fprintf(out, "  dispatched in %.2fs (%.0f/s), posted in %.2fs (%.0f/s), from the wallet's start (first row dispatched after %.2fs)\n",
		d.DispatchSeconds, d.DispatchRate, d.PostSeconds, d.PostRate, d.FirstDispatchSeconds)
	for _, p := range []string{"wallet", "gl"} {
		if rss, peak, err := memory(sys.pids()[p]); err == nil {
			d.Memory = append(d.Memory, Memory{Name: p, RSSMiB: rss, PeakMiB: peak})
		}
	}
	return d, nil
}

func hostInfo(ctx context.Context, opts Options) Host {
	h := Host{Cores: runtime.NumCPU()}
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		h.LoadAvg = strings.TrimSpace(string(data))
	}
	if pool, err := database.Open(ctx, opts.DatabaseURL, 1); err == nil {
		_ = pool.QueryRow(ctx, "SELECT version()").Scan(&h.PostgreSQL)
		_ = pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&h.SynchronousCommit)
		pool.Close()
	}
	if out, err := exec.CommandContext(ctx, "go", "version").Output(); err == nil {
		h.Go = strings.TrimSpace(string(out))
	}
	return h
}

// natsServerVersion is what bin --version says, "nats-server v2.9.10" (the figures
// say which broker they used); "nats-server, version unknown" when it says nothing.
func natsServerVersion(ctx context.Context, bin string) string {
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if version := strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server: "); err == nil && version != "" {
		return "nats-server " + version
	}
	return "nats-server, version unknown"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// WriteFiles writes the report as JSON and Markdown (and the plot when asked) into
// opts.ResultsDir and returns the paths.
func (r *Report) WriteFiles(dir string, plot bool) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, r.Started.Format("20060102-150405"))
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	paths := []string{base + ".json", base + ".md"}
	if err := os.WriteFile(paths[0], data, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(paths[1], []byte(r.Markdown()), 0o644); err != nil {
		return nil, err
	}
	if plot {
		p := base + "-latency.png"
		if err := r.Plot(p); err != nil {
			return paths, fmt.Errorf("plot: %w", err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}
