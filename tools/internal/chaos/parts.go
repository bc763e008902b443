package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/systemtest"
)

// The parts of the harness that a longer-running one (tools/internal/soak) builds on: the system,
// its supervisor, the load in batches, the invariants, and the outages of the scenarios (PauseGL,
// LockWalletInbox, StopBroker).

// NewTimeline returns a timeline that also prints each event to out (nil: prints nothing).
func NewTimeline(out io.Writer) *Timeline { return newTimeline(out) }

// StartSystem starts a system of topo with its databases on opts.DatabaseURL's server, its
// brokers, logs and keys in dir; faults and notes go to tl. StopAll stops it.
func StartSystem(ctx context.Context, opts Options, topo Topology, dir string, bins Binaries, tl *Timeline) (*System, error) {
	return startSystem(ctx, opts, topo, dir, bins.Binaries, bins.NATSServer, tl)
}

// Supervise restarts services that die without the harness having stopped them, until ctx ends.
func (s *System) Supervise(ctx context.Context) { s.supervise(ctx) }

// JetStream connects the harness to the system's brokers (see jetStream); close releases it.
func (s *System) JetStream() (js jetstream.JetStream, close func(), err error) { return s.jetStream() }

// StreamName is the name of source's stream in the system's namespace.
func (s *System) StreamName(source string) string { return s.streamName(source) }

// SetupWallets creates the funding wallet and n users through c and returns the users' ids.
func SetupWallets(ctx context.Context, c *systemtest.Client, n int) ([]string, error) {
	return setupWallets(ctx, c, n)
}

// RunLoad sends one batch of total movements (transfers, reversals, holds, atomic batches) over duration with
// clients concurrent clients, keys made from seed: a batch's seed must differ from every other
// batch's of the same system.
func RunLoad(ctx context.Context, targets []*systemtest.Client, users []string, seed uint64, total, clients int, duration time.Duration) LoadResult {
	return runLoad(ctx, targets, users, seed, total, clients, duration)
}

// Add adds what the clients of batch saw to r.
func (r *LoadResult) Add(batch LoadResult) {
	if r.Confirmed == nil {
		r.Confirmed, r.Amounts = map[string]string{}, map[string]int64{}
		r.Reversals, r.Holds, r.Batches = map[string]string{}, map[string]*HoldOutcome{}, map[string]*BatchOutcome{}
	}
	maps.Copy(r.Confirmed, batch.Confirmed)
	maps.Copy(r.Amounts, batch.Amounts)
	maps.Copy(r.Reversals, batch.Reversals)
	maps.Copy(r.Holds, batch.Holds)
	maps.Copy(r.Batches, batch.Batches)
	r.Refused += batch.Refused
	r.Requests += batch.Requests
	r.Retried += batch.Retried
	r.GaveUp += batch.GaveUp
	r.Skipped += batch.Skipped
	r.Attempts = append(r.Attempts, batch.Attempts...)
}

// WaitQuiet waits, for timeout at most, until nothing is left in flight (see waitQuiet).
func WaitQuiet(ctx context.Context, s *System, timeout time.Duration) error {
	return waitQuiet(ctx, s, timeout)
}

// Verify checks every invariant of the system against what the clients saw (see verify).
func Verify(ctx context.Context, s *System, load LoadResult) ([]Check, Counts) {
	return verify(ctx, s, load, false)
}

// CommandChecks runs what an operator runs against the system's databases: `wallet verify`,
// `gl verify` and `gl reconcile` (reading the wallet's database), with the services' own
// settings (their database URLs, multi-host ones included).
func CommandChecks(ctx context.Context, sys *System) []Check {
	wallet, gl := sys.Wallets[0], sys.GLs[0]
	var checks []Check
	for _, c := range []struct {
		name string
		p    *systemtest.Process
		args []string
		env  []string
	}{
		{"wallet verify passes", wallet, []string{"verify"}, nil},
		{"gl verify passes", gl, []string{"verify"}, nil},
		{"gl reconcile finds no difference", gl, []string{"reconcile"}, []string{"GL_RECONCILE_WALLET_DATABASE_URL=" + sys.WalletURL}},
	} {
		cmd := exec.CommandContext(ctx, c.p.Bin, c.args...)
		cmd.Env = slices.Concat(os.Environ(), c.p.Env, c.env, []string{"LOG_LEVEL=warn"})
		var outBuf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &outBuf, &outBuf
		err := cmd.Run()
		detail := lastLines(outBuf.String(), 3)
		if err != nil {
			detail = fmt.Sprintf("%v: %s", err, lastLines(outBuf.String(), 12))
		}
		checks = append(checks, Check{Name: c.name, Passed: err == nil, Detail: detail})
	}
	return checks
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
