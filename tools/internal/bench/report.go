package bench

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Report is everything one run measured.
type Report struct {
	RunID   string          `json:"run_id"`
	Started time.Time       `json:"started"`
	Elapsed string          `json:"elapsed"`
	Cores   int             `json:"cores"`
	Host    Host            `json:"host"`
	Options Options         `json:"options"`
	WorkDir string          `json:"work_dir,omitempty"`
	Limits  Limits          `json:"limits"`
	Closed  *Phase          `json:"closed_loop,omitempty"`
	Open    *Phase          `json:"open_loop,omitempty"`
	Alone   *WalletAlone    `json:"wallet_alone,omitempty"`
	Drain   *Drain          `json:"backlog,omitempty"`
	Replay  *Replay         `json:"replay,omitempty"`
	Peer    *Peer           `json:"peer_watermill,omitempty"`
	Scale   *Scale          `json:"scale,omitempty"`
	Memory  []Memory        `json:"memory,omitempty"`  // after both load phases
	Metrics *MetricsSection `json:"metrics,omitempty"` // both services' /metrics over the run
	Targets []Target        `json:"targets"`
	Notes   []string        `json:"notes,omitempty"`
}

// Host describes the machine of the run.
type Host struct {
	Cores             int    `json:"cores"`
	LoadAvg           string `json:"loadavg_at_start"`
	PostgreSQL        string `json:"postgresql"`
	NATSServer        string `json:"nats_server"` // the broker of the run, with its version
	SynchronousCommit string `json:"synchronous_commit"`
	Go                string `json:"go"`
}

// Limits are pgbench's figures for the services' SQL.
type Limits struct {
	Wallet PgbenchResult `json:"wallet_transaction"`
	// WalletUnnamed is the same transaction sent as the services send theirs: unnamed
	// statements, parsed and planned at each execution. Not a limit: it tells what the
	// protocol is worth (docs/bench.md).
	WalletUnnamed PgbenchResult `json:"wallet_transaction_unnamed"`
	GL            PgbenchResult `json:"gl_batch"`
	GLTwoClients  PgbenchResult `json:"gl_batch_two_clients"` // the consumer's two loops
	// The wallet relay's bookkeeping: rounds of ClaimOutbox and MarkDispatched of 100 rows, at
	// one client and at two (the relay runs two rounds at once).
	Relay           PgbenchResult `json:"relay_round"`
	RelayTwoClients PgbenchResult `json:"relay_round_two_clients"`
	Error           string        `json:"error,omitempty"`
}

// Phase is one load phase.
type Phase struct {
	Mode           string         `json:"mode"`
	Clients        int            `json:"clients,omitempty"`
	TargetRate     float64        `json:"target_rate,omitempty"`
	Seconds        float64        `json:"seconds"`
	OK             int            `json:"ok"`
	Errors         int            `json:"errors"`
	Skipped        int64          `json:"skipped,omitempty"` // open loop: not sent, too many in flight
	Statuses       map[string]int `json:"statuses"`
	APIRate        float64        `json:"api_rate"` // 201s per second
	API            Latency        `json:"api_latency"`
	CommitToPosted Latency        `json:"commit_to_posted"`
	CommitToAcked  Latency        `json:"commit_to_acknowledged"`
	// The segments of commit→posted: until the relay marked the row dispatched (after the
	// PubAcks of its whole batch, so it may come after the GL's claim), and until the GL's
	// inbox claim (inbox.received_at) of the event.
	CommitToDispatched Latency   `json:"commit_to_dispatched"`
	CommitToClaimed    Latency   `json:"commit_to_gl_inbox_claim"`
	Unposted           int       `json:"unposted"`
	Steady             Steady    `json:"steady"`
	DrainAfterLoad     string    `json:"drain_after_load"` // until every transfer was posted and acknowledged
	CPU                CPUUse    `json:"cpu"`
	Samples            []Sample  `json:"samples"`
	Notes              []string  `json:"notes,omitempty"`
	Requests           []request `json:"-"`
	Points             []Point   `json:"-"`
}

// Point is one transfer's commit→posted latency at its commit time.
type Point struct {
	At      time.Duration
	Latency time.Duration
}

// Drain is the backlog measurement.
type Drain struct {
	Rows    int  `json:"rows"`
	Partial bool `json:"partial"` // the drain did not finish within the time watched
	// Which part did not finish: the relay's dispatch, the GL's posting, or both.
	DispatchPartial bool    `json:"dispatch_partial,omitempty"`
	PostPartial     bool    `json:"post_partial,omitempty"`
	WriteSeconds    float64 `json:"write_seconds"`
	DispatchSeconds float64 `json:"dispatch_seconds"` // wallet start → last row dispatched
	// FirstDispatchSeconds is wallet start → first row dispatched: the process's start-up, which
	// the rates include.
	FirstDispatchSeconds float64 `json:"first_dispatch_seconds"`
	DispatchRate         float64 `json:"dispatch_rate"`
	PostSeconds          float64 `json:"post_seconds"` // wallet start → last entry posted
	PostRate             float64 `json:"post_rate"`
	// Republished counts the catch-up's re-publishes of backlog rows (acknowledgment later
	// than EVENTS_ACK_TIMEOUT): work the relay and the broker did twice.
	Republished int64    `json:"republished"`
	CPU         CPUUse   `json:"cpu"`
	Memory      []Memory `json:"memory"`
	Notes       []string `json:"notes,omitempty"`
}

// Memory is a process's resident set, now and at its peak (VmHWM).
type Memory struct {
	Name    string  `json:"name"`
	RSSMiB  float64 `json:"rss_mib"`
	PeakMiB float64 `json:"peak_rss_mib"`
}

// Target is one of the targets with this run's figure.
type Target struct {
	Name   string  `json:"name"`
	Figure string  `json:"figure"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
	Known  bool    `json:"known"` // false: not measured in this run
}

func (t Target) verdict() string {
	switch {
	case !t.Known:
		return "not measured"
	case t.Met:
		return "met"
	}
	return "MISSED"
}

// notMeasured is a target this run did not measure, with what would measure it.
func notMeasured(name, target, why string) Target {
	return Target{Name: name, Target: target, Figure: "not measured: " + why}
}

// targets judges the run against the six performance targets, in their order.
func targets(r *Report) []Target {
	var ts []Target
	lim := r.Limits
	limitMissing := "pgbench's limit missing (" + strings.TrimSpace(lim.Error+" "+lim.Wallet.Error) + "; -pgbench)"

	// 1. The API with the whole pipeline running, and the GL keeping up with it.
	const apiName, apiTarget = "1. API transfers/s, whole pipeline running, ÷ pgbench's wallet tx (same concurrency)", "≥ 0.8×"
	const e2eName, e2eTarget = "1. end-to-end keeps up (GL entries/s ÷ API, lag flat)", "lag flat"
	switch c := r.Closed; {
	case c == nil:
		ts = append(ts, notMeasured(apiName, apiTarget, "no closed loop"), notMeasured(e2eName, e2eTarget, "no closed loop"))
	default:
		if w := lim.Wallet.TPS; w > 0 {
			ratio := Ratio(c.APIRate, w)
			figure := fmt.Sprintf("%.0f/s ÷ %.0f/s = %.2f×", c.APIRate, w, ratio)
			if u := lim.WalletUnnamed.TPS; u > 0 {
				figure += fmt.Sprintf(" (÷ the same SQL sent unnamed, %.0f/s: %.2f×)", u, Ratio(c.APIRate, u))
			}
			figure += budgetText(c.CPU, lim.Wallet) + apiCeilingText(lim)
			ts = append(ts, Target{Name: apiName, Figure: figure, Target: apiTarget, Value: ratio, Met: ratio >= 0.8, Known: true})
		} else {
			ts = append(ts, notMeasured(apiName, apiTarget, limitMissing))
		}
		ratio := Ratio(c.Steady.EntryRate, c.APIRate)
		ts = append(ts, Target{Name: e2eName,
			Figure: fmt.Sprintf("%.0f/s ÷ %.0f/s = %.2f×, lag slope %+.1f/s", c.Steady.EntryRate, c.APIRate, ratio, c.Steady.LagSlope),
			Target: e2eTarget, Value: ratio, Met: !c.Steady.LagGrows && c.Unposted == 0, Known: c.APIRate > 0})
	}

	// 2. The backlog drain against both pgbench limits of the same run, and against Watermill.
	rows := ""
	if d := r.Drain; d != nil && d.Rows != 100_000 {
		rows = fmt.Sprintf(" (%s rows, not 100k)", thousands(d.Rows))
	}
	const dispName, dispTarget = "2. backlog dispatched ÷ the relay's pgbench limit at 2 clients (its two rounds at once)", "≥ 0.8×"
	const postName, postTarget = "2. backlog posted ÷ the GL's pgbench batch limit at 2 clients (the consumer's two loops)", "≥ 0.8×"
	const peerName, peerTarget = "2. backlog posted ÷ Watermill's SQL forwarder, same machine", "≥ 5×"
	partial := func(p bool) string {
		if p {
			return ", partial"
		}
		return ""
	}
	switch d := r.Drain; {
	case d == nil:
		why := "-backlog 0 (the default 100000 measures it)"
		ts = append(ts, notMeasured(dispName, dispTarget, why), notMeasured(postName, postTarget, why), notMeasured(peerName, peerTarget, why))
	default:
		for _, x := range []struct {
			name, unit string
			ours       float64
			limit      PgbenchResult
			secs       float64
			partial    bool
			ceiling    string
		}{
			{dispName, "rows", d.DispatchRate, lim.RelayTwoClients, d.DispatchSeconds, d.DispatchPartial,
				drainCeilingText(lim.RelayTwoClients, lim.GLTwoClients, "dispatched")},
			{postName, "events", d.PostRate, lim.GLTwoClients, d.PostSeconds, d.PostPartial,
				drainCeilingText(lim.GLTwoClients, lim.RelayTwoClients, "posted")},
		} {
			if x.limit.EventsPerSec <= 0 {
				ts = append(ts, notMeasured(x.name+rows, dispTarget, limitMissing))
				continue
			}
			ratio := Ratio(x.ours, x.limit.EventsPerSec)
			ts = append(ts, Target{Name: x.name + rows,
				Figure: fmt.Sprintf("%.0f/s ÷ %.0f %s/s = %.2f× (%.2fs%s)%s%s", x.ours, x.limit.EventsPerSec, x.unit, ratio, x.secs, partial(x.partial),
					budgetText(d.CPU, x.limit), x.ceiling),
				Target: dispTarget, Value: ratio, Met: ratio >= 0.8 && !x.partial, Known: x.ours > 0})
		}
		switch p := r.Peer; {
		case p == nil:
			ts = append(ts, notMeasured(peerName, peerTarget, "-peer-watermill=false (the full form's default runs it)"))
		case p.Error != "":
			ts = append(ts, notMeasured(peerName, peerTarget, p.Error))
		default:
			ratio := Ratio(d.PostRate, p.EventsPerSecond)
			ts = append(ts, Target{Name: peerName + rows,
				Figure: fmt.Sprintf("%.0f/s ÷ %.0f/s = %.2f× (dispatched alone: %.2f×)", d.PostRate, p.EventsPerSecond, ratio,
					Ratio(d.DispatchRate, p.EventsPerSecond)), Target: peerTarget,
				Value: ratio, Met: ratio >= 5 && !d.PostPartial, Known: true})
		}
	}

	// 3. Latency at half the sustained rate.
	const latName, latTarget = "3. commit→posted p99 at half the sustained rate", "< 25 ms"
	if o := r.Open; o != nil && o.CommitToPosted.Count > 0 {
		p99 := o.CommitToPosted.P99
		ts = append(ts, Target{Name: latName, Figure: fmt.Sprintf("%.1f ms at %.0f/s", p99, o.TargetRate), Target: latTarget,
			Value: p99, Met: p99 < 25 && o.Unposted == 0, Known: true})
	} else {
		ts = append(ts, notMeasured(latName, latTarget, "no open loop"))
	}

	// 4. The GL's reads at 10M lines, and against the same reads at 100k.
	ts = append(ts, scaleTargets(r)...)

	// 5. gl replay.
	const replayName, replayTarget = "5. gl replay of the wallet's stream", "≥ 10000 events/s"
	switch rp := r.Replay; {
	case rp == nil:
		why := "-replay=false"
		if r.Drain == nil {
			why = "-backlog 0 (it replays what the backlog phase left on the stream)"
		}
		ts = append(ts, notMeasured(replayName, replayTarget, why))
	case rp.Error != "":
		ts = append(ts, notMeasured(replayName, replayTarget, rp.Error))
	default:
		ts = append(ts, Target{Name: replayName, Figure: fmt.Sprintf("%.0f events/s (%d events in %.1fs)", rp.Rate, rp.Events, rp.Seconds),
			Target: replayTarget, Value: rp.Rate, Met: rp.Rate >= 10_000, Known: rp.Events > 0})
	}

	// 6. Memory: each service's peak over its processes' lives (the bench restarts both).
	peaks := map[string]float64{}
	var mems []Memory
	if r.Drain != nil {
		mems = r.Drain.Memory
	}
	for _, m := range slices.Concat(r.Memory, mems) {
		if m.Name != "nats-server" {
			peaks[m.Name] = max(peaks[m.Name], m.PeakMiB)
		}
	}
	for _, name := range []string{"wallet", "gl"} {
		t := "6. " + name + " peak RSS"
		if p, ok := peaks[name]; ok {
			ts = append(ts, Target{Name: t, Figure: fmt.Sprintf("%.1f MiB", p), Target: "< 64 MiB", Value: p, Met: p < 64, Known: p > 0})
		} else {
			ts = append(ts, notMeasured(t, "< 64 MiB", "no load phase"))
		}
	}
	return ts
}

// scaleTargets judge each read at the largest size: p99 under 10 ms, and within 2× of the
// same read at 100k lines.
func scaleTargets(r *Report) []Target {
	const target = "p99 < 10 ms and ≤ 2× at 100k"
	var ts []Target
	sc := r.Scale
	for _, read := range ScaleReads {
		name := "4. GL " + read + " at 10M lines ÷ at 100k"
		switch {
		case sc == nil:
			ts = append(ts, notMeasured(name, target, "-scale-lines 0 (the default 10000000 measures it)"))
			continue
		case sc.Error != "":
			ts = append(ts, notMeasured(name, target, sc.Error))
			continue
		case len(sc.Sizes) < 2:
			ts = append(ts, notMeasured(name, target, fmt.Sprintf("-scale-lines %d: needs more than %d", r.Options.ScaleLines, ScaleSmallLines)))
			continue
		}
		small, large := sc.Sizes[0], sc.Sizes[len(sc.Sizes)-1]
		if large.Lines != 10_000_000 {
			name = fmt.Sprintf("4. GL %s at %s lines (not 10M) ÷ at 100k", read, thousands(int(large.Lines)))
		}
		p99, ratio := large.Reads[read].P99, sc.Ratios[read]
		ts = append(ts, Target{Name: name,
			Figure: fmt.Sprintf("p99 %.2f ms ÷ %.2f ms = %.2f×", p99, small.Reads[read].P99, ratio), Target: target,
			Value: p99, Met: p99 < 10 && ratio <= 2, Known: true})
	}
	return ts
}

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// PrintTable writes the figures and the targets as aligned text.
func (r *Report) PrintTable(w io.Writer) {
	fmt.Fprintf(w, "\n== walletgl benchmark %s (%d cores%s, %s) ==\n", r.Started.Format(time.RFC3339), r.Cores, quickNote(r), procsNote(r.Options.ServiceProcs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range r.figures() {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", row[0], row[1], row[2])
	}
	tw.Flush()
	fmt.Fprintln(w, "\ntargets")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range r.Targets {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.Name, t.Figure, t.Target, t.verdict())
	}
	tw.Flush()
	if r.Metrics != nil {
		r.Metrics.print(w)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// procsNote says how many cores the services' Go runtimes used.
func procsNote(n int) string {
	if n <= 0 {
		return "services at Go's default GOMAXPROCS"
	}
	return fmt.Sprintf("services at GOMAXPROCS=%d", n)
}

func quickNote(r *Report) string {
	if r.Options.Quick {
		return ", quick form"
	}
	return ""
}

// figures are the rows of the table: what, figure, the limit or ratio it compares with.
func (r *Report) figures() [][3]string {
	var rows [][3]string
	add := func(a, b, c string) { rows = append(rows, [3]string{a, b, c}) }
	lim := r.Limits
	if lim.Error != "" {
		add("pgbench", lim.Error, "")
	}
	if lim.Wallet.TPS > 0 {
		add(fmt.Sprintf("limit: wallet tx, pgbench c=%d", lim.Wallet.Clients), fmt.Sprintf("%.0f tx/s", lim.Wallet.TPS), fmt.Sprintf("avg %.2f ms", lim.Wallet.LatencyAvgMS)+machineText(lim.Wallet))
	}
	switch u := lim.WalletUnnamed; {
	case u.TPS > 0:
		add(fmt.Sprintf("wallet tx sent as the services send it (unnamed statements), pgbench c=%d", u.Clients), fmt.Sprintf("%.0f tx/s", u.TPS),
			fmt.Sprintf("avg %.2f ms; %s", u.LatencyAvgMS, ratioText(u.TPS, lim.Wallet.TPS, "the limit")))
	case u.Error != "": // not a limit, so no target says it is missing: the row does
		add("wallet tx sent as the services send it (unnamed statements)", u.Error, "")
	}
	if lim.GL.TPS > 0 {
		add(fmt.Sprintf("limit: GL batch of %d, pgbench c=%d", r.Options.GLBatch, lim.GL.Clients), fmt.Sprintf("%.0f events/s", lim.GL.EventsPerSec), fmt.Sprintf("%.1f batches/s", lim.GL.TPS)+machineText(lim.GL))
	}
	if lim.GLTwoClients.TPS > 0 {
		add(fmt.Sprintf("limit: GL batch of %d, pgbench c=2", r.Options.GLBatch), fmt.Sprintf("%.0f events/s", lim.GLTwoClients.EventsPerSec), "the consumer's two loops' ceiling"+machineText(lim.GLTwoClients))
	}
	for _, rl := range []PgbenchResult{lim.Relay, lim.RelayTwoClients} {
		if rl.TPS > 0 {
			add(fmt.Sprintf("limit: relay claim+mark of %d, pgbench c=%d", RelayBatch, rl.Clients), fmt.Sprintf("%.0f rows/s", rl.EventsPerSec),
				strings.TrimSuffix(fmt.Sprintf("%.1f rounds/s%s; %s", rl.TPS, machineText(rl), rl.Note), "; "))
		}
	}
	if c := r.Closed; c != nil {
		add(fmt.Sprintf("API closed loop, %d clients", c.Clients), fmt.Sprintf("%.0f transfers/s", c.APIRate), ratioText(c.APIRate, lim.Wallet.TPS, "pgbench wallet tx"))
		add("  API latency", latText(c.API), fmt.Sprintf("%d errors", c.Errors))
		add("  end-to-end (GL entries/s, steady)", fmt.Sprintf("%.0f/s", c.Steady.EntryRate), ratioText(c.Steady.EntryRate, c.APIRate, "API")+"; "+ratioText(c.Steady.EntryRate, lim.GL.EventsPerSec, "pgbench GL"))
		add("  lag (transfers − entries)", fmt.Sprintf("%d → %d, slope %+.1f/s", c.Steady.LagStart, c.Steady.LagEnd, c.Steady.LagSlope), growsText(c.Steady.LagGrows))
		add("  commit→relay marked dispatched", latText(c.CommitToDispatched), "")
		add("  commit→GL inbox claim", latText(c.CommitToClaimed), "")
		add("  commit→posted", latText(c.CommitToPosted), fmt.Sprintf("drained %s after the load", c.DrainAfterLoad))
		add("  commit→acknowledged", latText(c.CommitToAcked), "")
		add("  CPU per transfer", cpuText(c.CPU), phaseBusyText(c.CPU, "transfer"))
	}
	if o := r.Open; o != nil {
		add(fmt.Sprintf("API open loop at %.0f/s", o.TargetRate), fmt.Sprintf("%.0f transfers/s", o.APIRate), fmt.Sprintf("%d errors, %d skipped", o.Errors, o.Skipped))
		add("  API latency (from due time)", latText(o.API), "")
		add("  commit→relay marked dispatched", latText(o.CommitToDispatched), "")
		add("  commit→GL inbox claim", latText(o.CommitToClaimed), "")
		add("  commit→posted", latText(o.CommitToPosted), fmt.Sprintf("%d unposted", o.Unposted))
		add("  commit→acknowledged", latText(o.CommitToAcked), "")
		add("  CPU per transfer", cpuText(o.CPU), phaseBusyText(o.CPU, "transfer"))
	}
	if a := r.Alone; a != nil {
		add(fmt.Sprintf("API wallet alone (GL stopped), %d clients", a.Clients), fmt.Sprintf("%.0f transfers/s", a.APIRate), ratioText(a.APIRate, lim.Wallet.TPS, "pgbench wallet tx"))
		add("  API latency", latText(a.API), fmt.Sprintf("%d errors", a.Errors))
		add("  CPU per transfer", cpuText(a.CPU), phaseBusyText(a.CPU, "transfer"))
		add("  GL catch-up from the broker", fmt.Sprintf("%d events in %.2fs, %.0f/s", a.CatchUpEvents, a.CatchUpSeconds, a.CatchUpRate), ratioText(a.CatchUpRate, lim.GL.EventsPerSec, "pgbench GL"))
		for _, n := range a.Notes {
			add("  note", n, "")
		}
	}
	if d := r.Drain; d != nil {
		add(fmt.Sprintf("backlog of %d rows", d.Rows), fmt.Sprintf("dispatched %.0f/s, posted %.0f/s", d.DispatchRate, d.PostRate), fmt.Sprintf("%.2fs / %.2fs from the wallet's start (its start-up: %.2fs)", d.DispatchSeconds, d.PostSeconds, d.FirstDispatchSeconds))
		if d.Republished > 0 {
			add("  re-published by catch-up", fmt.Sprintf("%d rows", d.Republished), "acknowledged later than EVENTS_ACK_TIMEOUT")
		}
		add("  CPU per event", cpuText(d.CPU), phaseBusyText(d.CPU, "event"))
		for _, n := range d.Notes {
			add("  note", n, "")
		}
	}
	if rp := r.Replay; rp != nil {
		if rp.Error != "" {
			add("gl replay --from-start", rp.Error, "")
		} else {
			add("gl replay --from-start", fmt.Sprintf("%d events in %.1fs, %.0f/s", rp.Events, rp.Seconds, rp.Rate), "its own figure (stdout's rate)")
		}
	}
	if p := r.Peer; p != nil {
		if p.Error != "" {
			add("Watermill SQL forwarder", p.Error, "")
		} else {
			add(fmt.Sprintf("Watermill SQL forwarder, %d rows", p.Rows), fmt.Sprintf("%.0f events/s", p.EventsPerSecond), fmt.Sprintf("%.2fs; peers/watermill", p.Seconds))
		}
	}
	if sc := r.Scale; sc != nil {
		if sc.Error != "" {
			add("GL reads at scale", sc.Error, "")
		}
		for _, sz := range sc.Sizes {
			add(fmt.Sprintf("GL reads at %s lines", thousands(int(sz.Lines))), fmt.Sprintf("loaded in %.1fs", sz.LoadSeconds),
				fmt.Sprintf("%d checkpoints, %s lines after the latest", sz.Checkpoints, thousands(int(sz.TailLines))))
			for _, read := range ScaleReads {
				add("  "+read, latText(sz.Reads[read]), "")
			}
		}
	}
	if t, ok := metricsTarget(r.Metrics); ok {
		add(t.Name, t.Figure, t.Target+": "+t.verdict())
	}
	for _, m := range r.Memory {
		add("memory: "+m.Name, fmt.Sprintf("peak %.1f MiB", m.PeakMiB), fmt.Sprintf("now %.1f MiB", m.RSSMiB))
	}
	return rows
}

func ratioText(ours, limit float64, what string) string {
	if limit <= 0 {
		return "÷ " + what + ": n/a"
	}
	return fmt.Sprintf("%.2f× %s", Ratio(ours, limit), what)
}

// busyText is how busy a phase (or a pgbench run) kept the machine and, when measured, the
// machine's CPU per unit.
func busyText(busy, perUnitUS float64, unit string) string {
	text := fmt.Sprintf("machine %.0f%% busy", busy*100)
	if perUnitUS > 0 {
		text += fmt.Sprintf(", %.0f µs per %s", perUnitUS, unit)
	}
	return text
}

// phaseBusyText is busyText for a phase of the pipeline, with the machine's context switches
// per unit when they were counted.
func phaseBusyText(use CPUUse, unit string) string {
	text := busyText(use.MachineBusy, use.MachinePerEventUS, unit)
	if use.SwitchesPerEvent > 0 {
		text += fmt.Sprintf(", %.0f context switches per %s", use.SwitchesPerEvent, unit)
	}
	return text
}

// machineText is busyText for a limit, after "; ", or "" when its CPU was not measured.
func machineText(lim PgbenchResult) string {
	if lim.MachinePerUnitUS <= 0 {
		return ""
	}
	return "; " + busyText(lim.MachineBusy, lim.MachinePerUnitUS, lim.unit())
}

// unit is one of what the limit counts: "transfer", "event", "row".
func (r PgbenchResult) unit() string { return strings.TrimSuffix(cmp.Or(r.Unit, "units"), "s") }

// budgetText sets what a phase cost the whole machine per unit beside what the limit's bare SQL
// cost it, and how busy each kept the machine: the ratio of two rates is the ratio of their
// CPU per unit times the ratio of their busy shares, so the text says whether a phase is
// behind its limit for its cost or for waiting (docs/bench.md, "The CPU budget"). Empty when
// either was not measured.
func budgetText(use CPUUse, lim PgbenchResult) string {
	if use.MachinePerEventUS <= 0 || lim.MachinePerUnitUS <= 0 {
		return ""
	}
	return fmt.Sprintf("; machine CPU per %s %.0f µs against the limit's %.0f µs (%.2f×), machine %.0f%% busy against %.0f%%",
		lim.unit(), use.MachinePerEventUS, lim.MachinePerUnitUS, lim.MachinePerUnitUS/use.MachinePerEventUS, use.MachineBusy*100, lim.MachineBusy*100)
}

// apiCeilingText says how far target 1 can go on one machine: every transfer costs at least
// the wallet transaction's bare SQL and the GL batch's bare SQL per event, on the same cores, so
// the API reaches at most wallet ÷ (wallet + GL) of the wallet's limit (at equal busy shares),
// and 0.8× leaves what remains of 1.25× the wallet's SQL for everything else: the services'
// HTTP, signing and decoding, the broker, the relay's marks, the acknowledgments (docs/bench.md,
// "The ceiling on one machine"); when the two SQL alone pass 1.25× the wallet's, it says the
// target is out of reach instead. Empty when either limit's CPU was not measured.
func apiCeilingText(lim Limits) string {
	w, g := lim.Wallet.MachinePerUnitUS, lim.GLTwoClients.MachinePerUnitUS
	if w <= 0 || g <= 0 {
		return ""
	}
	text := fmt.Sprintf("; on one machine the wallet tx's and the GL batch's SQL alone (%.0f + %.0f µs) cap it at %.2f×", w, g, w/(w+g))
	if left := w/0.8 - w - g; left >= 0 {
		return text + fmt.Sprintf(", and 0.8× leaves %.0f µs per transfer for everything else", left)
	}
	return text + ", below 0.8× whatever everything else costs"
}

// drainCeilingText says how far a backlog ratio can go while the relay and the GL drain at once
// on the same cores: each event costs at least both parts' bare SQL, so the part whose limit
// the ratio divides by reaches at most its own CPU ÷ both (at equal busy shares). For
// dispatched that holds only while the GL drains alongside; posted cannot avoid the relay's
// work however it is scheduled. Empty when either limit's CPU was not measured.
func drainCeilingText(own, other PgbenchResult, what string) string {
	o, x := own.MachinePerUnitUS, other.MachinePerUnitUS
	if o <= 0 || x <= 0 {
		return ""
	}
	return fmt.Sprintf("; on one machine, relay and GL draining at once, the two limits' SQL alone (%.0f + %.0f µs per event) cap %s at %.2f×",
		o, x, what, o/(o+x))
}

func growsText(g bool) string {
	if g {
		return "grows: the GL does not keep up"
	}
	return "steady"
}

func latText(l Latency) string {
	if l.Count == 0 {
		return "n/a"
	}
	return fmt.Sprintf("p50 %.1f  p90 %.1f  p99 %.1f  max %.1f ms", l.P50, l.P90, l.P99, l.Max)
}

func cpuText(c CPUUse) string {
	var parts []string
	for _, p := range c.Processes {
		name := strings.TrimSuffix(strings.TrimPrefix(p.Name, "postgres ("), " backends)")
		if strings.HasPrefix(p.Name, "postgres") {
			name = "pg:" + strings.TrimSuffix(name, " db")
		}
		if strings.HasPrefix(p.Name, "harness") {
			name = "loadgen"
		}
		parts = append(parts, fmt.Sprintf("%s %.0fµs", name, p.PerEventUS))
	}
	return strings.Join(parts, ", ")
}

// Markdown is the summary for bench/results and the docs.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# walletgl benchmark, %s\n\n", r.Started.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "%d cores%s, %s, %s, %s; load average at start %s; synchronous_commit=%s. Elapsed %s.\n\n",
		r.Cores, quickNote(r), firstWords(r.Host.PostgreSQL, 2), r.Host.NATSServer, procsNote(r.Options.ServiceProcs), r.Host.LoadAvg, r.Host.SynchronousCommit, r.Elapsed)
	if len(r.Options.WalletEnv)+len(r.Options.GLEnv) > 0 {
		// A run with settings of its own (an unsigned run of a pair, a larger batch) says so.
		fmt.Fprintf(&b, "Settings added: wallet `%s`; gl `%s`.\n\n", strings.Join(r.Options.WalletEnv, ","), strings.Join(r.Options.GLEnv, ","))
	}
	b.WriteString("| measure | figure | compared with |\n|---|---|---|\n")
	for _, row := range r.figures() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.TrimSpace(row[0]), row[1], row[2])
	}
	b.WriteString("\n| target | figure | target | verdict |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Figure, t.Target, t.verdict())
	}
	if r.Metrics != nil {
		r.Metrics.markdown(&b)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(n, len(f))], " ")
}

// Plot draws latency over the run's time: per second, the API latency's p50 and p99 and the
// commit→posted latency's p50 and p99, in milliseconds, for both load phases.
func (r *Report) Plot(path string) error {
	p := plot.New()
	p.Title.Text = "walletgl latency over time (closed loop, then open loop)"
	p.X.Label.Text = "seconds since the run started"
	p.Y.Label.Text = "ms"
	var api, posted []Point
	for _, ph := range []*Phase{r.Closed, r.Open} {
		if ph == nil {
			continue
		}
		for _, q := range ph.Requests {
			if q.Status == 201 {
				api = append(api, Point{At: q.At, Latency: q.Latency})
			}
		}
		posted = append(posted, ph.Points...)
	}
	series := []struct {
		name   string
		points []Point
		pct    float64
	}{
		{"API p50", api, 50}, {"API p99", api, 99}, {"commit→posted p50", posted, 50}, {"commit→posted p99", posted, 99},
	}
	for i, s := range series {
		xys := perSecond(s.points, s.pct)
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		line.Color = palette[i%len(palette)]
		if s.pct == 99 {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(line)
		p.Legend.Add(s.name, line)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p.Save(10*vg.Inch, 5*vg.Inch, path)
}

// perSecond buckets points by the second they happened in and takes the pct-th percentile of
// each bucket.
func perSecond(points []Point, pct float64) plotter.XYs {
	buckets := map[int][]time.Duration{}
	for _, p := range points {
		buckets[int(p.At.Seconds())] = append(buckets[int(p.At.Seconds())], p.Latency)
	}
	secs := make([]int, 0, len(buckets))
	for s := range buckets {
		secs = append(secs, s)
	}
	slices.Sort(secs)
	xys := make(plotter.XYs, 0, len(secs))
	for _, s := range secs {
		ds := buckets[s]
		slices.Sort(ds)
		xys = append(xys, plotter.XY{X: float64(s), Y: float64(Percentile(ds, pct)) / float64(time.Millisecond)})
	}
	return xys
}

var palette = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 31, G: 119, B: 180, A: 255},
	color.RGBA{R: 214, G: 39, B: 40, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
}
