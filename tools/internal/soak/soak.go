// Package soak is `make soak`: both services, their broker and databases under a steady mixed
// load (transfers, reversals, holds) for an hour, with every limit scaled down (streams of a
// few MiB, max age, duplicate window and retention in seconds, frequent checkpoints) so that
// the hour turns each of them over as weeks of production traffic would, and outages of the
// GL, of the wallet's consumer and of the broker at intervals. Each window it prints the
// streams' and tables' sizes, each process's memory, the commit→posted latency and the
// transfers late or posted twice; at the end it plots them and passes only when they stayed
// bounded, the latency did not grow, and every invariant and both services' verify and the
// GL's reconcile hold. It builds on the fault-injection harness (tools/internal/chaos).
package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"walletgl/internal/systemtest"
	"walletgl/tools/internal/chaos"
)

// Options choose a soak's length, load, limits and outages.
type Options struct {
	Duration time.Duration // how long the load runs
	Window   time.Duration // how often the soak measures and prints
	Rate     float64       // movements (transfers, reversals, holds) a second
	Clients  int           // concurrent clients of the load
	Seed     uint64        // the load's keys and amounts
	Scaled   Scaled        // the limits given to the services
	// Outage is how long the GL is paused or the wallet's inbox locked; one outage (GL, wallet
	// consumer, broker in turn) starts a quarter into every window but the first and the last.
	Outage time.Duration
	// Quiet bounds the wait, after the load, for everything in flight to be posted.
	Quiet time.Duration
	// DatabaseURL is a PostgreSQL server's maintenance database to use instead of a cluster
	// of the soak's own (which it starts with production settings, autovacuum on).
	DatabaseURL string
	Results     string // directory of the windows' CSV and the plot ("": none)
	Keep        bool   // keep logs and databases of a passing soak too
}

// Full is `make soak`'s form: an hour in one-minute windows.
func Full(seed uint64) Options {
	return Options{Duration: time.Hour, Window: time.Minute, Rate: 20, Clients: 8, Seed: seed,
		Scaled: DefaultScaled(), Outage: 20 * time.Second, Quiet: 3 * time.Minute, Results: "soak/results"}
}

// Short is CI's form: five minutes in 30-second windows at half the rate, with limits scaled
// down further so that the warm-up still covers the longest of them and a 256 KiB stream fills
// (at 10 movements a second) before its events age out.
func Short(seed uint64) Options {
	o := Full(seed)
	o.Duration, o.Window, o.Rate, o.Outage = 5*time.Minute, 30*time.Second, 10, 8*time.Second
	o.Scaled = Scaled{
		StreamMaxBytes: 256 << 10, StreamMaxAge: time.Minute, DuplicateWindow: 10 * time.Second,
		Retention: 30 * time.Second, InboxRetention: 80 * time.Second,
		CheckpointInterval: time.Second, CheckpointLines: 500, CheckpointRetention: 30 * time.Second,
	}
	return o
}

// Warmup is how many windows Judge leaves out: a fifth of them, two at least, and enough to
// cover the longest retention and a window more, so that every table and stream has reached
// its steady size.
func (o Options) Warmup() int {
	s := o.Scaled
	longest := max(s.StreamMaxAge, s.Retention, s.InboxRetention, s.CheckpointRetention)
	windows := int(o.Duration / o.Window)
	return max(DefaultLimits(windows).Warmup, int((longest+o.Window-1)/o.Window)+1)
}

// Validate rejects options that cannot make a soak.
func (o Options) Validate() error {
	switch {
	case o.Window <= 0 || o.Duration < 4*o.Window:
		return fmt.Errorf("the soak needs at least 4 windows: duration %s, window %s", o.Duration, o.Window)
	case o.Rate <= 0 || o.Clients < 1:
		return fmt.Errorf("rate and clients must be positive: rate %g, clients %d", o.Rate, o.Clients)
	case o.Outage <= 0 || o.Outage > o.Window/2:
		return fmt.Errorf("an outage (%s) must be positive and at most half a window (%s)", o.Outage, o.Window)
	case int(o.Duration/o.Window) < o.Warmup()+2:
		return fmt.Errorf("%d windows of %s leave fewer than 2 after the warm-up of %d (which covers the longest retention): run longer", int(o.Duration/o.Window), o.Window, o.Warmup())
	}
	return o.Scaled.Validate()
}

// Report is what a soak found.
type Report struct {
	Windows     []Window
	Checks      []Check // the windows' verdicts, then the invariants and the commands at the end
	Equivalence []Factor
	Passed      bool
	Files       []string // the CSV and the plot written
	Dir         string   // logs, kept when the soak failed or was asked to keep them
}

// Run runs a soak with the binaries bins, printing as it goes to out.
func Run(ctx context.Context, opts Options, bins chaos.Binaries, out io.Writer) (rep Report, err error) {
	if err := opts.Validate(); err != nil {
		return rep, err
	}
	windows := int(opts.Duration / opts.Window)
	rep.Equivalence = Equivalence(opts.Scaled, time.Duration(windows)*opts.Window)
	printLimits(out, opts, rep.Equivalence)

	dir, err := os.MkdirTemp("", "soak-")
	if err != nil {
		return rep, fmt.Errorf("make the soak's directory: %w", err)
	}
	rep.Dir = dir
	dbURL := opts.DatabaseURL
	var cluster *systemtest.Cluster
	if dbURL == "" {
		if cluster, err = systemtest.StartCluster(ctx); err != nil {
			return rep, err
		}
		dbURL = cluster.URL()
		fmt.Fprintf(out, "postgresql: a cluster of the soak's own on 127.0.0.1:%d (autovacuum on)\n", cluster.Port)
	}
	defer func() {
		keep := opts.Keep || !rep.Passed
		if cluster != nil {
			where, stopErr := cluster.Stop(ctx, keep)
			if stopErr != nil {
				fmt.Fprintf(out, "stop postgresql: %v\n", stopErr)
			}
			if where != "" {
				fmt.Fprintf(out, "postgresql data and log kept in %s\n", where)
			}
		}
		if !keep {
			_ = os.RemoveAll(dir)
			rep.Dir = ""
		}
	}()

	tl := chaos.NewTimeline(out)
	walletEnv, glEnv := opts.Scaled.Env()
	sys, err := chaos.StartSystem(ctx, chaos.Options{DatabaseURL: dbURL, Seed: opts.Seed}, chaos.Topology{WalletEnv: walletEnv, GLEnv: glEnv}, dir, bins, tl)
	if sys != nil {
		defer func() {
			for _, err := range sys.StopAll() {
				tl.Note("shutdown: %v", err)
			}
			if !opts.Keep && rep.Passed && opts.DatabaseURL != "" {
				sys.DropDatabases(context.WithoutCancel(ctx))
			}
		}()
	}
	if err != nil {
		return rep, fmt.Errorf("start the system: %w", err)
	}
	key, err := sys.Wallets[0].CreateKey(ctx, "admin")
	if err != nil {
		return rep, err
	}
	client := systemtest.NewClient(sys.Wallets[0].Addr)
	client.Key = key
	users, err := chaos.SetupWallets(ctx, client, 20)
	if err != nil {
		return rep, err
	}
	smp, err := newSampler(sys, opts.Window)
	if err != nil {
		return rep, err
	}
	defer smp.close()

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); sys.Supervise(runCtx) }()
	go func() { defer wg.Done(); injectOutages(runCtx, sys, tl, start, opts, windows) }()
	loadDone := make(chan chaos.LoadResult, 1)
	go func() { loadDone <- runLoad(runCtx, client, users, start, opts, windows) }()

	fmt.Fprintln(out, header)
	faultsSeen := 0
	for i := range windows {
		if !sleepUntil(ctx, start.Add(time.Duration(i+1)*opts.Window)) {
			break
		}
		w := smp.sample(ctx, i+1, time.Since(start))
		events := slices.Clone(tl.Events)
		for _, e := range events[faultsSeen:] {
			if e.Fault {
				w.Faults = append(w.Faults, e.What)
			}
		}
		faultsSeen = len(events)
		rep.Windows = append(rep.Windows, w)
		fmt.Fprintln(out, w.line())
	}
	load := <-loadDone
	tl.Note("load done: %d confirmed (%d reversals asked, %d holds placed), %d refused, %d gave up", len(load.Confirmed), len(load.Reversals), len(load.Holds), load.Refused, load.GaveUp)
	quietErr := chaos.WaitQuiet(ctx, sys, opts.Quiet)
	stopRun()
	wg.Wait()
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}

	limits := DefaultLimits(len(rep.Windows))
	limits.Warmup = opts.Warmup()
	rep.Checks = Judge(rep.Windows, limits)
	quiet := Check{Name: "everything in flight was posted within " + opts.Quiet.String() + " of the load's end", Passed: quietErr == nil, Detail: "yes"}
	if quietErr != nil {
		quiet.Detail = quietErr.Error()
	}
	rep.Checks = append(rep.Checks, quiet)
	invariants, counts := chaos.Verify(ctx, sys, load)
	for _, c := range invariants {
		rep.Checks = append(rep.Checks, Check{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
	}
	tl.Note("counts: %d transfers (%d reversals), %d holds, %d posted, %d re-published", counts.Transfers, counts.Reversals, counts.Holds, counts.Posted, counts.Republished)
	for _, c := range chaos.CommandChecks(ctx, sys) {
		rep.Checks = append(rep.Checks, Check{Name: c.Name, Passed: c.Passed, Detail: c.Detail})
	}
	rep.Passed = true
	for _, c := range rep.Checks {
		rep.Passed = rep.Passed && c.Passed
	}
	if opts.Results != "" {
		rep.Files, err = writeResults(opts.Results, start, rep.Windows)
		if err != nil {
			fmt.Fprintf(out, "results: %v\n", err)
		}
	}
	return rep, nil
}

// runLoad sends the load in batches of one window each until the soak's last window ends.
func runLoad(ctx context.Context, client *systemtest.Client, users []string, start time.Time, opts Options, windows int) chaos.LoadResult {
	var total chaos.LoadResult
	per := max(int(opts.Rate*opts.Window.Seconds()), 1)
	end := start.Add(time.Duration(windows) * opts.Window)
	for batch := uint64(0); time.Until(end) > opts.Window/10 && ctx.Err() == nil; batch++ {
		d := min(opts.Window, time.Until(end))
		n := max(int(float64(per)*d.Seconds()/opts.Window.Seconds()), 1)
		// Each batch's keys come from a seed of its own.
		total.Add(chaos.RunLoad(ctx, []*systemtest.Client{client}, users, opts.Seed*100_000+batch, n, opts.Clients, d))
	}
	return total
}

// injectOutages takes the GL, the wallet's consumer and the broker away in turn, one outage a
// quarter into each window but the first and the last (the first after the warm-up and the
// last are the ones Judge compares; they end after the system has come back).
func injectOutages(ctx context.Context, sys *chaos.System, tl *chaos.Timeline, start time.Time, opts Options, windows int) {
	rng := rand.New(rand.NewPCG(opts.Seed, 11)) // which broker stops are kills: repeatable with the seed
	outages := []func() error{
		func() error { return chaos.PauseGL(ctx, sys, opts.Outage) },
		func() error { return chaos.LockWalletInbox(ctx, sys, opts.Outage) },
		func() error { return chaos.StopBroker(ctx, sys, rng.IntN(2) == 0) },
	}
	for w := 1; w < windows-1; w++ {
		if !sleepUntil(ctx, start.Add(time.Duration(w)*opts.Window+opts.Window/4)) {
			return
		}
		if err := outages[(w-1)%len(outages)](); err != nil && ctx.Err() == nil {
			tl.Note("outage: %v", err)
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(time.Until(t)):
		return true
	}
}

func printLimits(out io.Writer, opts Options, fs []Factor) {
	s := opts.Scaled
	fmt.Fprintf(out, "soak: %s in windows of %s (the first %d a warm-up), %g movements/s, outages of %s; seed %d\n", opts.Duration, opts.Window, opts.Warmup(), opts.Rate, opts.Outage, opts.Seed)
	fmt.Fprintf(out, "limits: stream %d B, max age %s, duplicate window %s, outbox retention %s, inbox retention %s, checkpoints every %s or %d lines, kept %s\n",
		s.StreamMaxBytes, s.StreamMaxAge, s.DuplicateWindow, s.Retention, s.InboxRetention, s.CheckpointInterval, s.CheckpointLines, s.CheckpointRetention)
	for _, f := range fs {
		fmt.Fprintf(out, "  %-17s production %-8s scaled %-8s ×%-7.0f → %s\n", f.Limit, f.Production, f.Scaled, f.Ratio, daysText(f.Days))
	}
	least := Standing(fs)
	fmt.Fprintf(out, "stands for %s of production traffic at %g movements/s (the least, through %s)\n", daysText(least.Days), opts.Rate, least.Limit)
}

// Print writes the verdict: each check, then PASSED or FAILED.
func (r Report) Print(w io.Writer) {
	fmt.Fprintln(w, "checks")
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %s: %s\n", mark, c.Name, c.Detail)
	}
	for _, f := range r.Files {
		fmt.Fprintf(w, "wrote     %s\n", f)
	}
	if r.Dir != "" {
		fmt.Fprintf(w, "logs      %s\n", r.Dir)
	}
	least := Standing(r.Equivalence)
	if r.Passed {
		fmt.Fprintf(w, "verdict   SOAK PASSED: bounded, no latency growth, nothing lost or doubled (%s of production)\n", daysText(least.Days))
		return
	}
	fmt.Fprintln(w, "verdict   SOAK FAILED (see above)")
}

// daysText says a number of days, in hours below one.
func daysText(d float64) string {
	if d < 1 {
		return fmt.Sprintf("%.1f hours", d*24)
	}
	return fmt.Sprintf("%.1f days", d)
}

// Failed names the checks that failed, as an error (nil when none did).
func (r Report) Failed() error {
	var names []string
	for _, c := range r.Checks {
		if !c.Passed {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("%d check(s) failed: %s", len(names), strings.Join(names, "; "))
}

// writeResults writes the windows as CSV and as a plot into dir.
func writeResults(dir string, start time.Time, ws []Window) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, "soak-"+start.Format("20060102-150405"))
	if err := os.WriteFile(base+".csv", []byte(csv(ws)), 0o644); err != nil {
		return nil, err
	}
	if err := plotWindows(base+".png", ws); err != nil {
		return []string{base + ".csv"}, fmt.Errorf("plot: %w", err)
	}
	return []string{base + ".csv", base + ".png"}, nil
}
