package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// WalletAlone is the closed loop run with the GL stopped: the wallet's write path (API, group
// commit and its relay publishing) with the machine to itself, as pgbench has it for the
// wallet's transaction; then the GL started again and timed catching up on what it missed.
type WalletAlone struct {
	Clients int     `json:"clients"`
	Seconds float64 `json:"seconds"`
	OK      int     `json:"ok"`
	Errors  int     `json:"errors"`
	APIRate float64 `json:"api_rate"`
	API     Latency `json:"api_latency"`
	CPU     CPUUse  `json:"cpu"`
	// CatchUp: the GL posting the phase's transfers from the broker after its start.
	CatchUpEvents  int64    `json:"catch_up_events"`
	CatchUpSeconds float64  `json:"catch_up_seconds"`
	CatchUpRate    float64  `json:"catch_up_rate"`
	Notes          []string `json:"notes,omitempty"`
}

// measureWalletAlone stops the GL, drives the API in a closed loop for d, then starts the GL and
// waits until it has posted and acknowledged everything.
func measureWalletAlone(ctx context.Context, sys *system, meter *cpuMeter, gen *loadGen, out io.Writer, opts Options) (*WalletAlone, error) {
	if err := sys.gl.Stop(30 * time.Second); err != nil {
		return nil, fmt.Errorf("stop gl: %w", err)
	}
	gen.resetCounters()
	start := time.Now()
	stop := progress(ctx, out, opts.TTY, func() string {
		el := time.Since(start).Seconds()
		return fmt.Sprintf("alone  %5.1fs/%s  sent %7d  ok %7d  errors %4d  %6.0f/s",
			el, opts.Duration, gen.sent.Load(), gen.ok.Load(), gen.failed.Load(), float64(gen.ok.Load())/el)
	})
	before := meter.snapshot(ctx)
	reqs := gen.closedLoop(ctx, opts.Clients, opts.Duration)
	after := meter.snapshot(ctx)
	stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	a := &WalletAlone{Clients: opts.Clients, Seconds: round(after.at.Sub(start).Seconds(), 2)}
	var lat []time.Duration
	for _, r := range reqs {
		if r.Status == 201 {
			a.OK++
			lat = append(lat, r.Latency)
		} else {
			a.Errors++
		}
	}
	a.APIRate = round(float64(a.OK)/a.Seconds, 1)
	a.API = Summarize(lat)
	a.CPU = diffCPU(before, after, int64(a.OK), []string{"wallet", "nats-server",
		"postgres (wallet db backends)", "harness (load generator)"})
	fmt.Fprintf(out, "  alone: %d ok, %d errors, %.0f/s; API p50 %.1f ms p99 %.1f ms; starting the GL …\n",
		a.OK, a.Errors, a.APIRate, a.API.P50, a.API.P99)

	t0 := time.Now()
	if err := sys.gl.Start(); err != nil {
		return nil, fmt.Errorf("start gl: %w", err)
	}
	if err := sys.gl.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	if sys.onRestart != nil {
		sys.onRestart(ctx)
	}
	if _, err := sys.waitQuiet(ctx, 3*time.Minute); err != nil {
		a.Notes = append(a.Notes, err.Error())
	}
	entries, err := sys.entriesSince(ctx, t0)
	if err != nil {
		return nil, err
	}
	var lastPosted *time.Time
	_ = sys.glDB.QueryRow(ctx, "SELECT max(posted_at) FROM journal_entries WHERE posted_at >= $1", t0).Scan(&lastPosted)
	a.CatchUpEvents = entries
	if lastPosted != nil && a.CatchUpEvents > 0 {
		a.CatchUpSeconds = round(lastPosted.Sub(t0).Seconds(), 3)
		a.CatchUpRate = round(float64(a.CatchUpEvents)/a.CatchUpSeconds, 1)
	}
	fmt.Fprintf(out, "  GL caught up on %d events in %.2fs (%.0f/s) from its start\n", a.CatchUpEvents, a.CatchUpSeconds, a.CatchUpRate)
	return a, nil
}
