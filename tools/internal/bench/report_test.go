package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A run with settings of its own (the unsigned run of a pair) says so in its summary; a default
// run has no such line.
func TestTheSummaryNamesTheSettingsARunAdded(t *testing.T) {
	t.Parallel()
	rep := &Report{Started: time.Date(2026, 11, 30, 15, 1, 0, 0, time.UTC), Cores: 2}
	require.NotContains(t, rep.Markdown(), "Settings added")
	rep.Options.WalletEnv = []string{"EVENTS_SIGNING_KEY_FILE=", "EVENTS_INSECURE_UNSIGNED=true"}
	rep.Options.GLEnv = []string{"EVENTS_INSECURE_UNSIGNED=true"}
	md := rep.Markdown()
	require.Contains(t, md, "Settings added: wallet `EVENTS_SIGNING_KEY_FILE=,EVENTS_INSECURE_UNSIGNED=true`; gl `EVENTS_INSECURE_UNSIGNED=true`.\n")
	require.Less(t, strings.Index(md, "Settings added"), strings.Index(md, "| measure |"))
}

// Every one of the six targets has its line, in their order; a run that measured none
// of them says "not measured" with the flag that would, and never passes one.
func TestEveryTargetHasALineAndNoneUnmeasuredPasses(t *testing.T) {
	t.Parallel()
	rep := &Report{Options: Options{ScaleLines: 0}}
	ts := targets(rep)
	var numbers []string
	for _, tg := range ts {
		numbers = append(numbers, tg.Name[:2])
		require.False(t, tg.Known, tg.Name)
		require.False(t, tg.Met, tg.Name)
		require.Equal(t, "not measured", tg.verdict(), tg.Name)
		require.True(t, strings.HasPrefix(tg.Figure, "not measured: "), tg.Name)
	}
	require.Equal(t, []string{"1.", "1.", "2.", "2.", "2.", "3.", "4.", "4.", "4.", "5.", "6.", "6."}, numbers)
	require.Contains(t, ts[2].Figure, "-backlog")
	require.Contains(t, ts[6].Figure, "-scale-lines 0")
}

// Target 1 is judged against the prepared limit; the same SQL sent unnamed, as the services send
// it, is shown beside it, never instead.
func TestTheAPITargetIsJudgedAgainstThePreparedLimit(t *testing.T) {
	t.Parallel()
	rep := &Report{
		Limits: Limits{
			Wallet:        PgbenchResult{TPS: 2000, Clients: 16, Protocol: ProtocolPrepared},
			WalletUnnamed: PgbenchResult{TPS: 1000, Clients: 16, Protocol: ProtocolUnnamed},
		},
		Closed: &Phase{APIRate: 900},
	}
	api := targets(rep)[0]
	require.InDelta(t, 0.45, api.Value, 0.001, "900 ÷ the prepared 2,000")
	require.False(t, api.Met)
	require.Equal(t, "900/s ÷ 2000/s = 0.45× (÷ the same SQL sent unnamed, 1000/s: 0.90×)", api.Figure)
	var row [3]string
	for _, r := range rep.figures() {
		if strings.HasPrefix(r[0], "wallet tx sent as the services send it") {
			row = r
		}
	}
	require.Equal(t, "1000 tx/s", row[1])
	require.Contains(t, row[2], "0.50× the limit")

	rep.Limits.WalletUnnamed = PgbenchResult{Error: "pgbench: exit status 1"}
	require.Equal(t, "900/s ÷ 2000/s = 0.45×", targets(rep)[0].Figure, "without the unnamed figure, the bracket goes")
	row = [3]string{}
	for _, r := range rep.figures() {
		if strings.HasPrefix(r[0], "wallet tx sent as the services send it") {
			row = r
		}
	}
	require.Equal(t, "pgbench: exit status 1", row[1], "a failed run says why instead of vanishing")
}

// Targets 1 and 2 set the machine's CPU per unit of the phase beside the limit's: a pipeline
// that costs twice the bare SQL's CPU and keeps the machine as busy reaches half the limit.
func TestTheThroughputTargetsShowTheCPUBudget(t *testing.T) {
	t.Parallel()
	rep := &Report{
		Limits: Limits{
			Wallet:       PgbenchResult{TPS: 2000, Clients: 16, Unit: "transfers", MachineBusy: 0.9, MachinePerUnitUS: 900},
			GLTwoClients: PgbenchResult{EventsPerSec: 10_000, Unit: "events", MachineBusy: 0.5, MachinePerUnitUS: 100},
		},
		Closed: &Phase{APIRate: 1000, CPU: CPUUse{MachineBusy: 0.9, MachinePerEventUS: 1800}},
		Drain:  &Drain{Rows: 100_000, PostRate: 2_500, CPU: CPUUse{MachineBusy: 0.5, MachinePerEventUS: 400}},
	}
	ts := targets(rep)
	require.Equal(t, "1000/s ÷ 2000/s = 0.50×; machine CPU per transfer 1800 µs against the limit's 900 µs (0.50×), machine 90% busy against 90%"+
		"; on one machine the wallet tx's and the GL batch's SQL alone (900 + 100 µs) cap it at 0.90×, and 0.8× leaves 125 µs per transfer for everything else",
		ts[0].Figure)
	require.Contains(t, ts[3].Figure, "machine CPU per event 400 µs against the limit's 100 µs (0.25×), machine 50% busy against 50%")
	require.NotContains(t, ts[3].Figure, "cap", "without the relay's CPU there is no ceiling to draw")
	var limitRow [3]string
	for _, r := range rep.figures() {
		if strings.HasPrefix(r[0], "limit: wallet tx") {
			limitRow = r
		}
	}
	require.Contains(t, limitRow[2], "machine 90% busy, 900 µs per transfer")

	rep.Limits.GLTwoClients.MachinePerUnitUS = 300 // more than the quarter of 900 that 0.8× allows
	require.True(t, strings.HasSuffix(targets(rep)[0].Figure, "(900 + 300 µs) cap it at 0.75×, below 0.8× whatever everything else costs"),
		"no negative budget: %s", targets(rep)[0].Figure)

	rep.Limits.Wallet.MachinePerUnitUS = 0
	require.Equal(t, "1000/s ÷ 2000/s = 0.50×", targets(rep)[0].Figure, "a limit without its CPU has no budget")
}

// While the relay and the GL drain a backlog at once on the same cores, each event costs both
// limits' SQL, so each ratio has a ceiling below 1: the part's share of the two.
func TestTheBacklogTargetsShowTheirCeilingOnOneMachine(t *testing.T) {
	t.Parallel()
	rep := &Report{
		Limits: Limits{
			RelayTwoClients: PgbenchResult{EventsPerSec: 10_000, Unit: "rows", MachineBusy: 0.8, MachinePerUnitUS: 150},
			GLTwoClients:    PgbenchResult{EventsPerSec: 7_000, Unit: "events", MachineBusy: 0.9, MachinePerUnitUS: 250},
		},
		Drain: &Drain{Rows: 100_000, DispatchRate: 3_000, PostRate: 2_500, CPU: CPUUse{MachineBusy: 0.95, MachinePerEventUS: 800}},
	}
	figures := map[string]string{}
	for _, tg := range targets(rep) {
		figures[tg.Name] = tg.Figure
	}
	dispatched := figures["2. backlog dispatched ÷ the relay's pgbench limit at 2 clients (its two rounds at once)"]
	require.True(t, strings.HasSuffix(dispatched,
		"; on one machine, relay and GL draining at once, the two limits' SQL alone (150 + 250 µs per event) cap dispatched at 0.38×"), dispatched)
	posted := figures["2. backlog posted ÷ the GL's pgbench batch limit at 2 clients (the consumer's two loops)"]
	require.True(t, strings.HasSuffix(posted,
		"; on one machine, relay and GL draining at once, the two limits' SQL alone (250 + 150 µs per event) cap posted at 0.62×"), posted)
}

// The backlog's ratios use the 2-client limits (the relay's two rounds, the consumer's two
// loops), and a missing Watermill peer is reported, not judged.
func TestTheBacklogTargetsUseTheTwoClientLimits(t *testing.T) {
	t.Parallel()
	rep := &Report{
		Limits: Limits{
			Relay: PgbenchResult{EventsPerSec: 20_000}, RelayTwoClients: PgbenchResult{EventsPerSec: 25_000},
			GL: PgbenchResult{EventsPerSec: 12_000}, GLTwoClients: PgbenchResult{EventsPerSec: 10_000},
		},
		Drain: &Drain{Rows: 100_000, DispatchRate: 21_000, PostRate: 7_000},
		Peer:  &Peer{Error: "peers/watermill missing"},
	}
	find := func(part string) Target {
		for _, tg := range targets(rep) {
			if strings.Contains(tg.Name, part) {
				return tg
			}
		}
		t.Fatalf("no target names %q", part)
		return Target{}
	}
	dispatched, posted, peer := find("relay's pgbench"), find("GL's pgbench"), find("Watermill")
	require.True(t, dispatched.Known)
	require.InDelta(t, 0.84, dispatched.Value, 0.001, "21k ÷ the 2-client 25k")
	require.True(t, dispatched.Met)
	require.InDelta(t, 0.7, posted.Value, 0.001, "7k ÷ the 2-client 10k")
	require.False(t, posted.Met)
	require.False(t, peer.Known)
	require.Equal(t, "not measured: peers/watermill missing", peer.Figure)

	rep.Drain.Partial, rep.Drain.PostPartial = true, true
	require.True(t, find("relay's pgbench").Met, "the relay finished: only the posting was partial")
	require.False(t, find("GL's pgbench").Met)
	rep.Drain.Partial, rep.Drain.PostPartial = false, false

	rep.Peer = &Peer{Rows: 100_000, EventsPerSecond: 1_000}
	peer = find("Watermill")
	require.True(t, peer.Known)
	require.True(t, peer.Met, "7k ÷ 1k = 7×")
}

// The scale targets: p99 under 10 ms at the large size and within 2× of 100k; a run that
// loaded fewer than 10M lines says how many.
func TestTheScaleTargetsJudgeP99AndTheRatio(t *testing.T) {
	t.Parallel()
	lat := func(p99 float64) map[string]Latency {
		return map[string]Latency{readBalance: {P99: p99}, readBalanceAs: {P99: p99}, readTrial: {P99: p99 * 3}}
	}
	rep := &Report{Scale: &Scale{
		Sizes:  []ScaleSize{{Lines: 100_000, Reads: lat(1)}, {Lines: 1_000_000, Reads: lat(1.5)}},
		Ratios: map[string]float64{readBalance: 1.5, readBalanceAs: 1.5, readTrial: 1.5},
	}}
	ts := scaleTargets(rep)
	require.Len(t, ts, 3)
	require.Contains(t, ts[0].Name, "1,000,000 lines (not 10M)")
	require.True(t, ts[0].Met)
	require.True(t, ts[1].Met)
	require.True(t, ts[2].Met, "4.5 ms, 1.5×")
	rep.Scale.Ratios[readTrial] = 2.5
	require.False(t, scaleTargets(rep)[2].Met, "under 10 ms but 2.5× the small ledger's")
}

func TestParseReplayReadsTheSummary(t *testing.T) {
	t.Parallel()
	out := "gl replay: rebuilt database x from stream bench_wallet in 2.1s\n" +
		"  events read          20300\n  entries posted       20300\n  rate                 9876 events/s\n"
	events, rate, err := ParseReplay(out)
	require.NoError(t, err)
	require.Equal(t, int64(20300), events)
	require.Equal(t, 9876.0, rate)
	_, _, err = ParseReplay("gl replay: nothing\n")
	require.Error(t, err)
}

// The summary says which broker the figures used (a current nats-server or Debian's
// 2.9), as the built binary reports itself.
func TestTheSummaryNamesTheBroker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := dir + "/nats-server"
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\necho 'nats-server: v2.9.10'\n"), 0o755))
	rep := &Report{Started: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), Cores: 2}
	rep.Host.PostgreSQL = "PostgreSQL 15.20 on x86_64"
	rep.Host.NATSServer = natsServerVersion(context.Background(), bin)
	require.Contains(t, rep.Markdown(), "2 cores, PostgreSQL 15.20, nats-server v2.9.10, services at Go's default GOMAXPROCS; ")
	rep.Options.ServiceProcs = 1
	require.Contains(t, rep.Markdown(), "nats-server v2.9.10, services at GOMAXPROCS=1; ", "the summary says how many cores the services' runtimes used")
	require.Equal(t, "nats-server, version unknown", natsServerVersion(context.Background(), dir+"/missing"))
}
