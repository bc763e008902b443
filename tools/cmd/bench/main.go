// Command bench is `make bench`: it starts its own databases, JetStream server and the two
// services, drives the wallet API, measures the pipeline against pgbench's limit for the same
// SQL in the same run, prints the table of figures, ratios and targets, and writes a JSON report
// and a Markdown summary (and a latency plot with -plot) under bench/results/.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"walletgl/tools/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dbURL := getenv("TEST_DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	var (
		quick     = fs.Bool("quick", false, "the quick form: about a minute, a backlog of 20k rows")
		clients   = fs.Int("clients", 0, "closed loop: concurrent clients, and pgbench's concurrency (default 16)")
		duration  = fs.Duration("duration", 0, "closed loop's length (default 40s, quick 12s)")
		rate      = fs.Float64("rate", 0, "open loop: transfers per second (default: half the sustained end-to-end rate)")
		openDur   = fs.Duration("open-duration", 0, "open loop's length (default 20s, quick 8s)")
		users     = fs.Int("users", 0, "user wallets (default 1000)")
		backlog   = fs.Int("backlog", -1, "outbox rows of the drain measurement, 0 to skip (default 100000, quick 20000)")
		drainTime = fs.Duration("drain-timeout", 0, "how long the backlog drain is watched before its rate is reported as partial (default 75s, quick 25s)")
		scale     = fs.Int("scale-lines", -1, "the GL's reads timed at 100k lines and again after growing the ledger to this many, 0 to skip (default 10000000, quick 1000000)")
		replay    = fs.Bool("replay", true, "after the backlog, time gl replay --from-start of the wallet's stream")
		watermill = fs.Bool("peer-watermill", false, "after the backlog, drain as many rows with Watermill's SQL forwarder (peers/watermill) (default true, quick false)")
		pgTime    = fs.Duration("pgbench-time", 0, "each pgbench run's length (default 10s, quick 5s)")
		pgbench   = fs.String("pgbench", "pgbench", "the pgbench binary; empty to skip the limits")
		results   = fs.String("results", "bench/results", "directory of the JSON report, Markdown summary and plot; empty for none")
		plot      = fs.Bool("plot", false, "also write a PNG of latency over time")
		keep      = fs.Bool("keep", false, "keep the databases, logs and scripts")
		walletEnv = fs.String("wallet-env", "", "settings for the wallet, KEY=VALUE,… (e.g. EVENTS_BATCH_SIZE=500)")
		glEnv     = fs.String("gl-env", "", "settings for the GL, KEY=VALUE,…")
		procs     = fs.Int("gomaxprocs", 1, "both services' GOMAXPROCS, as a CPU limit of that many cores per container sets it; 0 for Go's default (every core)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	opts := bench.Default(dbURL)
	if *quick {
		opts = bench.Quick(dbURL)
	}
	setInt(&opts.Clients, *clients)
	setInt(&opts.Users, *users)
	setDur(&opts.Duration, *duration)
	setDur(&opts.OpenDuration, *openDur)
	setDur(&opts.PgbenchTime, *pgTime)
	setDur(&opts.DrainTimeout, *drainTime)
	if *backlog >= 0 {
		opts.Backlog = *backlog
	}
	if *scale >= 0 {
		opts.ScaleLines = *scale
	}
	fs.Visit(func(f *flag.Flag) { // its default depends on -quick
		if f.Name == "peer-watermill" {
			opts.PeerWatermill = *watermill
		}
	})
	opts.Replay = *replay
	opts.Rate, opts.Pgbench, opts.Plot, opts.Keep = *rate, *pgbench, *plot, *keep
	opts.Warmup = min(opts.Warmup, opts.Duration/3)
	opts.WalletEnv, opts.GLEnv = splitEnv(*walletEnv), splitEnv(*glEnv)
	if *procs < 0 {
		return fmt.Errorf("-gomaxprocs: 0 for Go's default, or the cores each service may use")
	}
	opts.ServiceProcs = *procs
	opts.NATSServerBin = getenv("NATS_SERVER_BIN")
	if f, ok := stdout.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		opts.TTY = true
	}
	if opts.Users < 2 || opts.Clients < 1 {
		return fmt.Errorf("need at least 2 users and 1 client")
	}
	if opts.ScaleLines > 0 && opts.ScaleLines < bench.ScaleMinLines {
		return fmt.Errorf("-scale-lines: 0 to skip, or at least %d", bench.ScaleMinLines)
	}

	rep, err := bench.Run(ctx, opts, stdout)
	if rep != nil && err == nil {
		rep.PrintTable(stdout)
	}
	if rep != nil && *results != "" && err == nil {
		paths, werr := rep.WriteFiles(*results, *plot)
		for _, p := range paths {
			fmt.Fprintln(stdout, "wrote", p)
		}
		if werr != nil {
			return werr
		}
	}
	if err != nil && rep != nil && rep.WorkDir != "" {
		fmt.Fprintln(stderr, "logs kept in", rep.WorkDir)
	}
	return err
}

func setInt(dst *int, v int) {
	if v > 0 {
		*dst = v
	}
}

func setDur(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}

func splitEnv(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
