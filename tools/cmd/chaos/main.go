// Command chaos is `make chaos`: the fault-injection harness. It runs named scenarios against
// the real binaries and prints a report per scenario ending in a verdict; it exits 0 only
// when every invariant held in every scenario.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"walletgl/tools/internal/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		names     = fs.String("scenario", "all", "scenarios to run, comma-separated, or all")
		seed      = fs.Uint64("seed", uint64(time.Now().UnixNano()%1_000_000), "seed of the load and the fault schedule (a run is repeatable with it)")
		short     = fs.Bool("short", false, "the CI form: a few hundred transfers per scenario")
		transfers = fs.Int("transfers", 0, "transfers per scenario (overrides the form)")
		duration  = fs.Duration("duration", 0, "how long the load of each scenario lasts (overrides the form)")
		keep      = fs.Bool("keep", false, "keep databases and logs of passing scenarios too")
		jsonDir   = fs.String("json", "", "directory to write one JSON report per scenario into")
		list      = fs.Bool("list", false, "list the scenarios and exit")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *list {
		for _, sc := range chaos.Scenarios() {
			fmt.Fprintf(stdout, "%-17s %s\n", sc.Name, sc.Description)
		}
		return nil
	}
	scenarios, err := pick(*names)
	if err != nil {
		return err
	}
	dbURL := getenv("TEST_DATABASE_URL")
	if dbURL == "" {
		dbURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	opts := chaos.Full(dbURL, *seed)
	if *short {
		opts = chaos.Short(dbURL, *seed)
	}
	if *transfers > 0 {
		opts.Transfers = *transfers
	}
	if *duration > 0 {
		opts.Duration = *duration
	}
	opts.Keep = *keep

	buildDir, err := os.MkdirTemp("", "chaos-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(buildDir)
	fmt.Fprintln(stdout, "building wallet, gl and nats-server …")
	bins, err := chaos.Build(ctx, buildDir)
	if err != nil {
		return err
	}
	var failed []string
	var summary []string
	for _, sc := range scenarios {
		rep := chaos.Run(ctx, sc, opts, bins, stdout)
		rep.Print(stdout)
		if *jsonDir != "" {
			if err := writeJSON(*jsonDir, rep); err != nil {
				return err
			}
		}
		mark := "PASS"
		switch {
		case rep.Skipped != "" && getenv("CI") == "true":
			// Under CI a missing tool fails the run, as a missing service fails the tests.
			mark = "FAIL"
			failed = append(failed, sc.Name+" (CI=true: "+rep.Skipped+")")
		case rep.Skipped != "":
			mark = "SKIP"
		case !rep.Passed:
			mark = "FAIL"
			failed = append(failed, sc.Name)
		}
		line := fmt.Sprintf("  %s  %-17s confirmed %5d  posted %5d  faults %3d  %s",
			mark, sc.Name, rep.Counts.Confirmed, rep.Counts.Posted, rep.Counts.Faults, rep.Elapsed)
		if rep.Error != "" {
			line += "\n        " + firstLine(rep.Error, 160)
		}
		summary = append(summary, line)
		if ctx.Err() != nil {
			break
		}
	}
	fmt.Fprintf(stdout, "\nsummary (seed %d)\n%s\n", *seed, strings.Join(summary, "\n"))
	if len(failed) > 0 {
		return fmt.Errorf("%d scenario(s) failed: %s", len(failed), strings.Join(failed, ", "))
	}
	fmt.Fprintf(stdout, "verdict   ALL %d SCENARIOS PASSED\n", len(scenarios))
	return nil
}

func pick(names string) ([]chaos.Scenario, error) {
	if names == "all" || names == "" {
		return chaos.Scenarios(), nil
	}
	var out []chaos.Scenario
	for _, name := range strings.Split(names, ",") {
		sc, err := chaos.Find(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

func writeJSON(dir string, rep chaos.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, rep.Scenario+".json"))
	if err != nil {
		return err
	}
	defer f.Close()
	return rep.JSON(f)
}

// firstLine is the first line of s, cut at n bytes: a scenario's error in the summary, whose
// tail is what a CI log keeps (the full error is in the scenario's report above it).
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
