// Command soak is `make soak`: both services, their broker and a PostgreSQL cluster of its own
// under a steady mixed load for an hour, every limit scaled down and outages at intervals. It
// prints a line a window, writes a CSV and a plot, and exits 0 only when the streams, the
// tables and every process's memory stayed bounded, the commit→posted p99 did not grow, and
// every invariant, `verify` and `gl reconcile` hold at the end (docs/operations.md, "Soak").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"walletgl/tools/internal/chaos"
	"walletgl/tools/internal/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// -short chooses the form whose values the other flags' defaults are, so it is read first.
	fs.Bool("short", false, "the CI form: five minutes in 30 s windows at 10 movements/s, 8 s outages, limits scaled down further (docs/operations.md)")
	form := soak.Full
	if slices.ContainsFunc(args, func(a string) bool {
		return strings.TrimLeft(a, "-") == "short" || strings.TrimLeft(a, "-") == "short=true"
	}) {
		form = soak.Short
	}
	def := form(uint64(time.Now().UnixNano() % 1_000_000))
	o := def
	fs.DurationVar(&o.Duration, "duration", def.Duration, "how long the load runs")
	fs.DurationVar(&o.Window, "window", def.Window, "how often the soak measures and prints a line")
	fs.Float64Var(&o.Rate, "rate", def.Rate, "movements (transfers, reversals, holds) a second")
	fs.IntVar(&o.Clients, "clients", def.Clients, "concurrent clients of the load")
	fs.Uint64Var(&o.Seed, "seed", def.Seed, "seed of the load's keys and amounts")
	fs.DurationVar(&o.Outage, "outage", def.Outage, "how long each GL pause and wallet inbox lock lasts (one outage a window)")
	fs.DurationVar(&o.Quiet, "quiet", def.Quiet, "how long to wait after the load for everything in flight to be posted")
	fs.Int64Var(&o.Scaled.StreamMaxBytes, "stream-max-bytes", def.Scaled.StreamMaxBytes, "EVENTS_STREAM_MAX_BYTES of both services")
	fs.DurationVar(&o.Scaled.StreamMaxAge, "stream-max-age", def.Scaled.StreamMaxAge, "EVENTS_STREAM_MAX_AGE")
	fs.DurationVar(&o.Scaled.DuplicateWindow, "duplicate-window", def.Scaled.DuplicateWindow, "EVENTS_DUPLICATE_WINDOW")
	fs.DurationVar(&o.Scaled.Retention, "retention", def.Scaled.Retention, "EVENTS_RETENTION (acknowledged outbox rows)")
	fs.DurationVar(&o.Scaled.InboxRetention, "inbox-retention", def.Scaled.InboxRetention, "EVENTS_INBOX_RETENTION (processed inbox rows)")
	fs.DurationVar(&o.Scaled.CheckpointInterval, "checkpoint-interval", def.Scaled.CheckpointInterval, "GL_CHECKPOINT_INTERVAL")
	fs.Int64Var(&o.Scaled.CheckpointLines, "checkpoint-lines", def.Scaled.CheckpointLines, "GL_CHECKPOINT_LINES")
	fs.DurationVar(&o.Scaled.CheckpointRetention, "checkpoint-retention", def.Scaled.CheckpointRetention, "GL_CHECKPOINT_RETENTION")
	fs.StringVar(&o.DatabaseURL, "database-url", "", "a PostgreSQL server's maintenance database to use instead of a cluster of the soak's own")
	fs.StringVar(&o.Results, "results", def.Results, "directory of the windows' CSV and plot; empty for none")
	fs.BoolVar(&o.Keep, "keep", false, "keep logs and the cluster's data of a passing soak too")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return err
	}

	buildDir, err := os.MkdirTemp("", "soak-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(buildDir)
	fmt.Fprintln(stdout, "building wallet, gl and nats-server …")
	bins, err := chaos.Build(ctx, buildDir)
	if err != nil {
		return err
	}
	rep, err := soak.Run(ctx, o, bins, stdout)
	if err != nil {
		if rep.Dir != "" {
			fmt.Fprintf(stdout, "logs      %s\n", rep.Dir)
		}
		return err
	}
	rep.Print(stdout)
	return rep.Failed()
}
