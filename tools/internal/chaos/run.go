// Package chaos is the fault-injection harness: it starts the real binaries as processes with
// their own databases and JetStream servers it controls, drives transfers through the wallet API
// with clients that retry with the same Idempotency-Key until they get an answer, injects the
// faults of a named scenario, waits for quiescence and checks every invariant from the
// databases and the APIs. `make chaos` runs every scenario; CI runs each in a short form.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"walletgl/internal/systemtest"
	"walletgl/tools/internal/pgcluster"
)

// Options choose the size and repeatability of a run.
type Options struct {
	DatabaseURL string        // a PostgreSQL server's maintenance database
	Seed        uint64        // makes the load and the fault schedule repeatable
	Transfers   int           // transfers the clients send
	Clients     int           // concurrent clients
	Duration    time.Duration // how long the load is spread over
	Quiet       time.Duration // how long to wait for quiescence after the load
	Keep        bool          // keep databases and logs (always kept on failure)
	Dir         string        // where logs and broker stores go (default: a new temp dir)
}

// Short is the CI form: a few hundred transfers over a few seconds.
func Short(dbURL string, seed uint64) Options {
	return Options{DatabaseURL: dbURL, Seed: seed, Transfers: 300, Clients: 8, Duration: 8 * time.Second, Quiet: 2 * time.Minute}
}

// Full is `make chaos`'s form.
func Full(dbURL string, seed uint64) Options {
	return Options{DatabaseURL: dbURL, Seed: seed, Transfers: 3000, Clients: 16, Duration: 40 * time.Second, Quiet: 3 * time.Minute}
}

// Report is what a run found.
type Report struct {
	Scenario    string          `json:"scenario"`
	Description string          `json:"description"`
	Seed        uint64          `json:"seed"`
	Timeline    []TimelineEvent `json:"timeline"`
	Counts      Counts          `json:"counts"`
	Checks      []Check         `json:"checks"`
	Passed      bool            `json:"passed"`
	Error       string          `json:"error,omitempty"`
	// Skipped says why the scenario did not run (the tools it needs are not installed here).
	Skipped string `json:"skipped,omitempty"`
	// Failovers are the database failovers of an HA scenario, each with how long writes took
	// to come back.
	Failovers []Failover    `json:"failovers,omitempty"`
	Elapsed   time.Duration `json:"elapsed"`
	Dir       string        `json:"dir"`
}

// Binaries builds the service binaries and the nats-server once for several runs.
type Binaries struct {
	systemtest.Binaries
	NATSServer string
}

// Build prepares the binaries in dir.
func Build(ctx context.Context, dir string) (Binaries, error) {
	bins, err := systemtest.Build(ctx, dir)
	if err != nil {
		return Binaries{}, err
	}
	natsBin, err := systemtest.NATSServerBinary(ctx, dir)
	if err != nil {
		return Binaries{}, err
	}
	return Binaries{Binaries: bins, NATSServer: natsBin}, nil
}

// Run runs one scenario and returns its report; progress goes to out.
func Run(ctx context.Context, sc Scenario, opts Options, bins Binaries, out io.Writer) (rep Report) {
	start := time.Now()
	rep = Report{Scenario: sc.Name, Description: sc.Description, Seed: opts.Seed}
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "chaos-"+sc.Name+"-"); err != nil {
			rep.Error = err.Error()
			return rep
		}
	}
	fmt.Fprintf(out, "== %s: %s (seed %d)\n", sc.Name, sc.Description, opts.Seed)
	if sc.Topology.HA {
		if err := pgcluster.HATools(); err != nil {
			if opts.Dir == "" {
				_ = os.Remove(dir)
			}
			rep.Skipped = err.Error()
			return rep
		}
	}
	rep.Dir = dir
	opts.Duration = max(opts.Duration, sc.MinDuration)
	tl := newTimeline(out)
	defer func() {
		rep.Timeline, rep.Elapsed = tl.Events, time.Since(start).Round(time.Millisecond)
		rep.Counts.Faults = tl.Faults()
	}()

	var ha *pgcluster.HA
	if sc.Topology.HA {
		var err error
		tl.Note("starting an HA PostgreSQL cluster: etcd, three nodes under Patroni, synchronous_mode")
		if ha, err = pgcluster.StartHA(ctx); err != nil {
			rep.Error = fmt.Sprintf("start the ha cluster: %v", err)
			return rep
		}
		defer func() {
			keep := opts.Keep || !rep.Passed
			ha.Stop(keep)
			if keep {
				tl.Note("ha cluster's data and logs kept in %s", ha.Dir())
			}
		}()
		leader, err := ha.WaitLeader(ctx, time.Minute)
		if err != nil {
			rep.Error = fmt.Sprintf("start the ha cluster: %v", err)
			return rep
		}
		opts.DatabaseURL = ha.URL("postgres")
		tl.Note("ha cluster up in %s: leader %s; %s", ha.Dir(), leader.Name, opts.DatabaseURL)
	}
	sys, err := startSystem(ctx, opts, sc.Topology, dir, bins.Binaries, bins.NATSServer, tl)
	if sys != nil {
		sys.HA = ha
		defer func() {
			for _, err := range sys.StopAll() {
				tl.Note("shutdown: %v", err)
			}
			if rep.Passed && !opts.Keep {
				sys.DropDatabases(context.WithoutCancel(ctx))
				_ = os.RemoveAll(dir)
				rep.Dir = ""
			}
		}()
	}
	if err != nil {
		rep.Error = fmt.Sprintf("start system: %v", err)
		return rep
	}
	tl.Note("system up: %d wallet, %d gl, %d nats", len(sys.Wallets), len(sys.GLs), len(sys.Brokers))

	key, err := sys.Wallets[0].CreateKey(ctx, "admin")
	if err != nil {
		rep.Error = fmt.Sprintf("create an API key: %v", err)
		return rep
	}
	clients := make([]*systemtest.Client, len(sys.Wallets))
	for i, w := range sys.Wallets {
		clients[i] = systemtest.NewClient(w.Addr)
		clients[i].Key = key
	}
	users, err := setupWallets(ctx, clients[0], 20)
	if err != nil {
		rep.Error = fmt.Sprintf("create wallets: %v", err)
		return rep
	}

	runCtx, stopRun := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sys.supervise(runCtx) }()
	injectErr := make(chan error, 1)
	go func() {
		rng := rand.New(rand.NewPCG(opts.Seed, 7))
		injectErr <- sc.Inject(runCtx, sys, rng, opts.Duration)
	}()
	load := runLoad(ctx, clients, users, opts.Seed, opts.Transfers, opts.Clients, opts.Duration)
	tl.Note("load done: %d confirmed (%d reversals asked, %d holds placed, %d batches asked), %d refused, %d retried requests", len(load.Confirmed), len(load.Reversals), len(load.Holds), len(load.Batches), load.Refused, load.Retried)
	if err := <-injectErr; err != nil {
		tl.Note("fault injection: %v", err)
		rep.Error = fmt.Sprintf("inject: %v", err)
	}
	quietErr := waitQuiet(ctx, sys, opts.Quiet)
	stopRun()
	wg.Wait()
	if quietErr != nil {
		tl.Note("%v", quietErr)
	}
	rep.Checks, rep.Counts = verify(ctx, sys, load, sc.AllowDeadLetters)
	if sc.OperatorChecks {
		rep.Checks = append(rep.Checks, CommandChecks(ctx, sys)...)
	}
	rep.Failovers = sys.takeFailovers(load.Attempts)
	if sc.Topology.HA {
		rep.Checks = append(rep.Checks, readinessFollowed(sys, rep.Failovers))
	}
	rep.Passed = rep.Error == "" && quietErr == nil
	for _, c := range rep.Checks {
		rep.Passed = rep.Passed && c.Passed
	}
	if quietErr != nil {
		rep.Checks = append([]Check{{Name: "the system became quiet", Detail: quietErr.Error()}}, rep.Checks...)
	}
	return rep
}

// Print writes the run report for people.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nscenario  %s — %s\nseed      %d   elapsed %s\n", r.Scenario, r.Description, r.Seed, r.Elapsed)
	if r.Skipped != "" {
		fmt.Fprintf(w, "verdict   %s SKIPPED: %s\n", strings.ToUpper(r.Scenario), r.Skipped)
		return
	}
	fmt.Fprintf(w, "faults    %d injected\n", r.Counts.Faults)
	for _, e := range r.Timeline {
		if e.Fault {
			fmt.Fprintf(w, "          %8s  %s\n", e.At, e.What)
		}
	}
	c := r.Counts
	fmt.Fprintf(w, "counts    confirmed %d, refused %d, gave up %d, requests %d (retries %d)\n", c.Confirmed, c.Refused, c.GaveUp, c.Requests, c.Retried)
	fmt.Fprintf(w, "          movements %d (reversals %d), holds %d, batches %d, posted %d, re-publishes %d, duplicates absorbed by the broker %d, by the inbox %d\n",
		c.Transfers, c.Reversals, c.Holds, c.Batches, c.Posted, c.Republished, c.BrokerDuplicates, c.InboxDuplicates)
	fmt.Fprintf(w, "answers   %s\n", statusCounts(c.Statuses))
	for _, f := range r.Failovers {
		fmt.Fprintf(w, "failover  %s\n", f)
	}
	fmt.Fprintln(w, "checks")
	for _, ch := range r.Checks {
		mark := "PASS"
		if !ch.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %s: %s\n", mark, ch.Name, ch.Detail)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error     %s\n", r.Error)
	}
	if r.Dir != "" {
		fmt.Fprintf(w, "logs      %s\n", r.Dir)
	}
	verdict := "PASSED: nothing lost, nothing twice, every cent accounted for"
	if !r.Passed {
		verdict = "FAILED: an invariant did not hold (see above)"
	}
	fmt.Fprintf(w, "verdict   %s %s\n", strings.ToUpper(r.Scenario), verdict)
}

// JSON writes the report as JSON.
func (r Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
