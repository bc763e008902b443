package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"walletgl/internal/harness"
)

// Scenario is one named way to hurt the system while transfers flow.
type Scenario struct {
	Name        string
	Description string
	Topology    Topology
	// Inject runs while the load runs (for about duration d) and must undo what it did
	// (restart what it stopped) before it returns.
	Inject func(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error
	// AllowDeadLetters: the scenario expects some rows to end in dead_letter (none does yet).
	AllowDeadLetters bool
}

// Scenarios lists every scenario, in the order `make chaos` runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name:        "gl-crash",
			Description: "kill -9 of the GL at random moments while it consumes, including between commit and ack",
			Topology:    Topology{GLEnv: []string{"FAULTS=gl.consumer.after_commit:crash@0.02,gl.consumer.before_commit:crash@0.01"}},
			Inject:      killRandomly(func(s *System) []*harness.Process { return s.GLs }),
		},
		{
			Name:        "wallet-crash",
			Description: "kill -9 of the wallet under load, between commit and response and in the relay between publish and dispatched",
			Topology: Topology{WalletEnv: []string{
				"FAULTS=wallet.transfer.after_commit:crash@0.005,wallet.relay.after_publish:crash@0.005"}},
			Inject: killRandomly(func(s *System) []*harness.Process { return s.Wallets }),
		},
		{
			Name:        "nats-restart",
			Description: "the NATS server stopped and restarted under load, gracefully and with kill -9, its store kept",
			Inject:      restartBroker,
		},
		{
			Name:        "postgres-outage",
			Description: "PostgreSQL connections of both services terminated in a loop for a while (pg_terminate_backend)",
			Inject:      terminateBackends,
		},
		{
			Name:        "scale-out",
			Description: "two wallets (two relays on one outbox) and two GLs (one durable consumer); one of each killed mid-run",
			Topology:    Topology{WalletInstances: 2, GLInstances: 2},
			Inject:      killOneOfEach,
		},
		{
			Name:        "nats-cluster",
			Description: "a three-node JetStream cluster, streams of three replicas; one node killed and brought back mid-run",
			Topology:    Topology{Brokers: 3},
			Inject:      killClusterNode,
		},
		{
			Name:        "duplicates",
			Description: "every event published twice, and re-published after a 1s duplicate window (GL paused past the ack timeout)",
			Topology: Topology{
				WalletEnv: []string{"FAULTS=wallet.relay.publish_twice:duplicate", "EVENTS_DUPLICATE_WINDOW=1s", "EVENTS_ACK_TIMEOUT=2s"},
				GLEnv:     []string{"FAULTS=gl.relay.publish_twice:duplicate", "EVENTS_DUPLICATE_WINDOW=1s", "EVENTS_ACK_TIMEOUT=2s"},
			},
			Inject: pauseGL(5 * time.Second),
		},
		{
			Name:        "slow-consumer",
			Description: "the GL paused past the acknowledgment timeout, so catch-up re-publishes, then resumed",
			Inject:      pauseGL(6 * time.Second),
		},
		{
			Name:        "broker-amnesia",
			Description: "the NATS server killed with unconsumed events in it, its store deleted, and a fresh one started on the same address mid-run",
			Inject:      wipeBroker,
		},
	}
}

// Find returns the scenario with this name.
func Find(name string) (Scenario, error) {
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc, nil
		}
	}
	return Scenario{}, fmt.Errorf("no scenario %q", name)
}

// killRandomly adds harness kill -9s at random moments to the fault points armed in the
// service's environment; the supervisor restarts what dies.
func killRandomly(targets func(*System) []*harness.Process) func(context.Context, *System, *rand.Rand, time.Duration) error {
	return func(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
		end := time.Now().Add(d)
		for time.Now().Before(end) {
			if !sleepCtx(ctx, time.Duration(float64(d)/4*(0.5+rng.Float64()))) {
				return nil
			}
			ts := targets(s)
			t := ts[rng.IntN(len(ts))]
			s.log.Fault("kill -9 %s", t.Name)
			s.Kill9(t, false)
		}
		return nil
	}
}

func restartBroker(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	b := s.Brokers[0]
	sleepCtx(ctx, d/5)
	s.log.Fault("stop %s gracefully", b.Name)
	if err := b.Stop(10 * time.Second); err != nil {
		s.log.Note("stop %s: %v", b.Name, err)
	}
	sleepCtx(ctx, 2*time.Second)
	s.log.Fault("start %s again", b.Name)
	if err := b.Restart(ctx); err != nil {
		return err
	}
	sleepCtx(ctx, d/4)
	s.log.Fault("kill -9 %s", b.Name)
	_ = b.Kill()
	sleepCtx(ctx, 2*time.Second)
	s.log.Fault("start %s again with its store", b.Name)
	return b.Restart(ctx)
}

func wipeBroker(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	b := s.Brokers[0]
	sleepCtx(ctx, d/4)
	// With the GL paused, events pile up in the stream unconsumed: the wipe then loses events
	// the broker had acknowledged, which only the outbox's catch-up can bring back.
	for _, g := range s.GLs {
		s.log.Fault("pause %s (SIGSTOP) so the stream holds unconsumed events", g.Name)
		if err := g.Pause(); err != nil {
			return err
		}
	}
	sleepCtx(ctx, 2*time.Second)
	s.log.Fault("kill -9 %s", b.Name)
	_ = b.Kill()
	if err := b.Wipe(); err != nil {
		return err
	}
	s.log.Fault("deleted %s's store; starting an empty server on the same address", b.Name)
	sleepCtx(ctx, time.Second)
	if err := b.Restart(ctx); err != nil {
		return err
	}
	for _, g := range s.GLs {
		s.log.Fault("resume %s (SIGCONT)", g.Name)
		if err := g.Resume(); err != nil {
			return err
		}
	}
	return nil
}

func killClusterNode(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	b := s.Brokers[rng.IntN(len(s.Brokers))]
	sleepCtx(ctx, d/4)
	s.log.Fault("kill -9 cluster node %s", b.Name)
	_ = b.Kill()
	sleepCtx(ctx, d/3)
	s.log.Fault("start %s again", b.Name)
	return b.Restart(ctx)
}

func killOneOfEach(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	sleepCtx(ctx, d/3)
	w, g := s.Wallets[rng.IntN(len(s.Wallets))], s.GLs[rng.IntN(len(s.GLs))]
	s.log.Fault("kill -9 %s and %s (they stay down)", w.Name, g.Name)
	s.Kill9(w, true)
	s.Kill9(g, true)
	return nil
}

func pauseGL(pause time.Duration) func(context.Context, *System, *rand.Rand, time.Duration) error {
	return func(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
		sleepCtx(ctx, d/4)
		for _, g := range s.GLs {
			s.log.Fault("pause %s (SIGSTOP) for %s", g.Name, pause)
			if err := g.Pause(); err != nil {
				return err
			}
		}
		sleepCtx(ctx, pause)
		for _, g := range s.GLs {
			s.log.Fault("resume %s (SIGCONT)", g.Name)
			if err := g.Resume(); err != nil {
				return err
			}
		}
		return nil
	}
}

// terminateBackends cuts every connection of both services to PostgreSQL, every 100 ms for a
// few seconds: requests fail with 503 meanwhile and nothing half-written may remain.
func terminateBackends(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	sleepCtx(ctx, d/4)
	outage := max(d/3, 3*time.Second)
	s.log.Fault("terminate all service connections to PostgreSQL every 100ms for %s", outage)
	admin, err := pgx.Connect(ctx, s.adminURL())
	if err != nil {
		return fmt.Errorf("connect as admin: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	names := []string{dbName(s.WalletURL), dbName(s.GLURL)}
	end := time.Now().Add(outage)
	killed := 0
	for time.Now().Before(end) && ctx.Err() == nil {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = ANY($1) AND pid <> pg_backend_pid()`, names).Scan(&n)
		if err != nil {
			return fmt.Errorf("terminate backends: %w", err)
		}
		killed += n
		sleepCtx(ctx, 100*time.Millisecond)
	}
	s.log.Fault("outage over: %d connections terminated", killed)
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
