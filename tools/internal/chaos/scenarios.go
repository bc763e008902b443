package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/events/contract"
	"walletgl/internal/systemtest"
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
	// MinDuration is the least the load lasts, whatever the form: the scenario's faults take
	// that long.
	MinDuration time.Duration
	// OperatorChecks adds `wallet verify`, `gl verify` and `gl reconcile` to the invariants.
	OperatorChecks bool
}

// Scenarios lists every scenario, in the order `make chaos` runs them.
func Scenarios() []Scenario {
	return []Scenario{
		{
			Name:        "gl-crash",
			Description: "kill -9 of the GL at random moments while it consumes, including between commit and ack",
			Topology:    Topology{GLEnv: []string{"FAULTS=gl.consumer.after_commit:crash@0.02,gl.consumer.before_commit:crash@0.01"}},
			Inject:      killRandomly(func(s *System) []*systemtest.Process { return s.GLs }),
		},
		{
			Name:        "wallet-crash",
			Description: "kill -9 of the wallet under load, between commit and response and in the relay between publish and dispatched",
			Topology: Topology{WalletEnv: []string{
				"FAULTS=wallet.transfer.after_commit:crash@0.005,wallet.relay.after_publish:crash@0.005"}},
			Inject: killRandomly(func(s *System) []*systemtest.Process { return s.Wallets }),
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
			Description: "the GL paused past the acknowledgment timeout (catch-up finds its events still in the stream and leaves them), then resumed",
			Inject:      pauseGL(6 * time.Second),
		},
		{
			Name:        "broker-amnesia",
			Description: "the NATS server killed with unconsumed events in it, its store deleted, and a fresh one started on the same address mid-run",
			Inject:      wipeBroker,
		},
		{
			Name:        "wallet-ack-loss",
			Description: "the wallet's inbox table locked for a while (the API keeps working), long enough for the broker to give up on TransferPosted.v2 deliveries",
			Topology: Topology{
				// A broker that gives up on a delivery after three tries two seconds apart, and
				// a wallet catch-up that re-publishes its unacknowledged rows after 4 s, through
				// a duplicate window short enough to let the copies reach the GL: what must bring
				// the acknowledgments back is the wallet's catch-up and the GL's answer to a
				// duplicate. The GL's own catch-up stays out of it (its re-publishes of
				// TransferPosted.v2 would rescue some rows or not by the luck of timing).
				WalletEnv: []string{"EVENTS_ACK_WAIT=2s", "EVENTS_MAX_DELIVER=3", "EVENTS_ACK_TIMEOUT=4s", "EVENTS_DUPLICATE_WINDOW=2s"},
				GLEnv:     []string{"EVENTS_ACK_TIMEOUT=10m", "EVENTS_DUPLICATE_WINDOW=2s"},
			},
			Inject: lockWalletInbox,
		},
		{
			Name:        "broker-store-full",
			Description: "the wallet's stream full (discard new, max bytes at its size) under load, every publish refused for a while, then its limits restored",
			Topology:    Topology{WalletEnv: []string{"EVENTS_MAX_ATTEMPTS=3"}},
			Inject:      fillWalletStream,
		},
		{
			Name:        "nats-leader-loss",
			Description: "a three-node cluster: a stream's leader (frozen with a follower, publishes unanswered) killed and restarted, several times, a new leader each time",
			Topology: Topology{
				Brokers: 3,
				// One publish round of each kind, so a relay waiting forever for a lost PubAck
				// cannot hide behind its other rounds.
				WalletEnv: []string{"EVENTS_RELAY_WORKERS=1", "EVENTS_PUBLISH_TIMEOUT=3s"},
				GLEnv:     []string{"EVENTS_RELAY_WORKERS=1", "EVENTS_PUBLISH_TIMEOUT=3s"},
			},
			Inject: killStreamLeaders,
		},
		{
			Name: "pg-failover",
			Description: "both databases on PostgreSQL under Patroni (three nodes, a synchronous standby): the primary killed with -9 " +
				"twice, a replica's replay frozen, a planned switchover while it lags",
			Topology:       Topology{HA: true},
			Inject:         pgFailover,
			MinDuration:    time.Minute,
			OperatorChecks: true,
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
func killRandomly(targets func(*System) []*systemtest.Process) func(context.Context, *System, *rand.Rand, time.Duration) error {
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
	sleepCtx(ctx, d/5)
	if err := StopBroker(ctx, s, false); err != nil {
		return err
	}
	sleepCtx(ctx, d/4)
	return StopBroker(ctx, s, true)
}

// StopBroker takes the system's first broker away for 2 s and starts it again with its store:
// stopped gracefully, or killed with SIGKILL when kill is set.
func StopBroker(ctx context.Context, s *System, kill bool) error {
	b := s.Brokers[0]
	if kill {
		s.log.Fault("kill -9 %s", b.Name)
		_ = b.Kill()
	} else {
		s.log.Fault("stop %s gracefully", b.Name)
		if err := b.Stop(10 * time.Second); err != nil {
			s.log.Note("stop %s: %v", b.Name, err)
		}
	}
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
		return PauseGL(ctx, s, pause)
	}
}

// PauseGL stops every GL process with SIGSTOP for pause (it keeps its connections and does
// nothing: an outage of the GL), then resumes them.
func PauseGL(ctx context.Context, s *System, pause time.Duration) error {
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

// lockWalletInbox holds an ACCESS EXCLUSIVE lock on the wallet's inbox table: transfers (which
// never touch it) go on, but no TransferPosted.v2 can be applied, so every delivery fails after
// its ack wait, until the broker has given up on the first of them many times over.
func lockWalletInbox(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	sleepCtx(ctx, d/4)
	return LockWalletInbox(ctx, s, max(2*d, 20*time.Second))
}

// LockWalletInbox blocks the wallet's consumer for hold: an ACCESS EXCLUSIVE lock on its inbox
// table, taken and released by a connection of the harness's.
func LockWalletInbox(ctx context.Context, s *System, hold time.Duration) error {
	conn, err := pgx.Connect(ctx, s.WalletURL)
	if err != nil {
		return fmt.Errorf("connect to the wallet's database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	release := func() error {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return tx.Rollback(rctx)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE"); err != nil {
		_ = release()
		return fmt.Errorf("lock the wallet's inbox: %w", err)
	}
	s.log.Fault("lock the wallet's inbox table (ACCESS EXCLUSIVE) for %s: no acknowledgment can be applied", hold)
	sleepCtx(ctx, hold)
	if err := release(); err != nil {
		return fmt.Errorf("unlock the wallet's inbox: %w", err)
	}
	s.log.Fault("unlock the wallet's inbox table")
	return nil
}

// fillWalletStream makes the wallet's stream full: discard policy new and a byte limit at its
// current size, so the broker refuses every new message ("maximum bytes exceeded") while it is
// perfectly healthy otherwise. Then it restores the stream's configuration as it was.
func fillWalletStream(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	sleepCtx(ctx, d/4)
	hold := max(d/2, 6*time.Second)
	js, closeJS, err := s.jetStream()
	if err != nil {
		return err
	}
	defer closeJS()
	name := s.streamName(contract.SourceWallet)
	stream, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", name, err)
	}
	info := stream.CachedInfo()
	prev, full := info.Config, info.Config
	full.Discard = jetstream.DiscardNew
	full.MaxBytes = int64(max(info.State.Bytes, 1)) // 0 would mean no limit
	if _, err := js.UpdateStream(ctx, full); err != nil {
		return fmt.Errorf("fill stream %s: %w", name, err)
	}
	s.log.Fault("stream %s full for %s: discard new, max bytes %d (its size, %d messages)", name, hold, full.MaxBytes, info.State.Msgs)
	sleepCtx(ctx, hold)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := js.UpdateStream(rctx, prev); err != nil {
		return fmt.Errorf("restore stream %s: %w", name, err)
	}
	s.log.Fault("stream %s limits restored (discard %s, max bytes %d)", name, prev.Discard, prev.MaxBytes)
	return nil
}

// killStreamLeaders takes a stream's leader away under load, several times, a new leader each
// time. A kill alone leaves a publish unanswered only if it reached the leader in its last
// milliseconds (after the kill the subjects have no responders, which the relay is told at
// once), so each round first freezes the leader together with one follower, the one the
// stream's publisher is not connected to: with no quorum, every publish the publisher's server
// forwards to the frozen leader stays unanswered for longer than any one wait for a PubAck
// (the scenario's relays wait EVENTS_PUBLISH_TIMEOUT, 3 s). Then the leader is killed (kill -9),
// the follower resumed, and the other two elect a new leader; the killed node is started again.
// Before each round it waits for a leader and every replica current, and it leaves the cluster
// so; a replica still behind after a minute is noted, and a leader with a quorum current is
// enough then (waitStreamQuorum).
func killStreamLeaders(ctx context.Context, s *System, rng *rand.Rand, d time.Duration) error {
	const freeze = 15 * time.Second
	js, closeJS, err := s.jetStream()
	if err != nil {
		return err
	}
	defer closeJS()
	rounds := max(2, int(d/(12*time.Second)))
	sources := []string{contract.SourceWallet, contract.SourceGL}
	start := time.Now()
	for i := range rounds {
		if !sleepCtx(ctx, time.Until(start.Add(time.Duration(i+1)*d/time.Duration(rounds+2)))) {
			return nil
		}
		t, err := s.pickLeader(ctx, js, []string{sources[i%2], sources[(i+1)%2]})
		if err != nil {
			return err
		}
		s.log.Fault("freeze %s (SIGSTOP), leader of stream %s, and %s, a follower, for %s: no quorum, %s's publishes through %s unanswered",
			t.leader.Name, t.stream, t.follower.Name, freeze, t.source, t.via)
		for _, b := range []*systemtest.Broker{t.leader, t.follower} {
			if err := b.Pause(); err != nil {
				return err
			}
		}
		sleepCtx(ctx, freeze)
		s.log.Fault("kill -9 %s; resume %s (SIGCONT)", t.leader.Name, t.follower.Name)
		_ = t.leader.Kill()
		if err := t.follower.Resume(); err != nil {
			return err
		}
		sleepCtx(ctx, time.Second)
		s.log.Fault("start %s again", t.leader.Name)
		if err := t.leader.Restart(ctx); err != nil {
			return err
		}
	}
	for _, src := range sources {
		name := s.streamName(src)
		leader, err := waitStreamQuorum(ctx, js, name, time.Minute, s.log.Note)
		if err != nil {
			return err
		}
		s.log.Note("stream %s: leader %s", name, leader)
	}
	return nil
}

// waitStreamQuorum waits up to wait for stream to have a leader and every replica current, as
// waitStreamLeader does, and returns the leader; past that, a leader and a quorum of current
// replicas is enough, and note is told the replicas still behind. nats-server 2.9 can leave a
// replica behind for good after a round of nats-leader-loss: its leader resets the stream's
// cluster state ("last sequence mismatch") and then cannot serve the replica's catch-up
// ("possibly beyond our last index … stream store EOF"). The stream takes and keeps messages on
// its quorum meanwhile, so the system's checks still mean what they say; the lagging copy is the
// broker's to repair.
func waitStreamQuorum(ctx context.Context, js jetstream.JetStream, stream string, wait time.Duration, note func(format string, args ...any)) (string, error) {
	leader, err := waitStreamLeader(ctx, js, stream, wait)
	if err == nil {
		return leader, nil
	}
	reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	st, infoErr := js.Stream(reqCtx, stream)
	cancel()
	if infoErr != nil {
		return "", err
	}
	cl := st.CachedInfo().Cluster
	if cl == nil || cl.Leader == "" {
		return "", err
	}
	current := 1 // the leader
	var behind []string
	for _, r := range cl.Replicas {
		if r.Current && !r.Offline {
			current++
			continue
		}
		behind = append(behind, r.Name)
	}
	if members := len(cl.Replicas) + 1; current <= members/2 {
		return "", err
	}
	note("stream %s: leader %s and a quorum current; %s still behind after %s (the broker's own catch-up)",
		stream, cl.Leader, strings.Join(behind, ", "), wait)
	return cl.Leader, nil
}

// leaderTarget is one round of killStreamLeaders: source's stream, its leader, the follower
// frozen with it, and the broker source's service publishes through ("?" when unknown).
type leaderTarget struct {
	source, stream, via string
	leader, follower    *systemtest.Broker
}

// pickLeader chooses a round's target among sources' streams: one whose publisher is connected
// to a follower, and whose leader no service is connected to. A kill of a client's own server
// ends the client's pending publishes with a disconnect, the easy case, and would also end a
// relay's wait that an earlier round left hanging; the case this scenario is after is the one
// where only the relay's own deadline can. When no stream qualifies, the first one's leader is
// asked to step down, a few times, for another; failing that, the first stream as it is.
func (s *System) pickLeader(ctx context.Context, js jetstream.JetStream, sources []string) (leaderTarget, error) {
	var first leaderTarget
	for try := range 6 {
		clients := s.clientBrokers(ctx, sources) // service -> broker name
		for i, source := range sources {
			t := leaderTarget{source: source, stream: s.streamName(source), via: "?"}
			name, err := waitStreamQuorum(ctx, js, t.stream, time.Minute, s.log.Note)
			if err != nil {
				return t, err
			}
			if t.leader = systemtest.BrokerNamed(s.Brokers, name); t.leader == nil {
				return t, fmt.Errorf("stream %s: leader %q is none of the harness's brokers", t.stream, name)
			}
			if via, ok := clients[source]; ok {
				t.via = via
			}
			for _, b := range s.Brokers {
				if b != t.leader && b.Name != t.via {
					t.follower = b
					break
				}
			}
			leaderHasClients := false
			for _, via := range clients {
				leaderHasClients = leaderHasClients || via == t.leader.Name
			}
			if t.via != "?" && t.via != t.leader.Name && !leaderHasClients {
				return t, nil
			}
			if i == 0 {
				first = t
			}
		}
		if try < 5 {
			// A new leader is drawn among the followers.
			reqCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := js.Conn().RequestWithContext(reqCtx, "$JS.API.STREAM.LEADER.STEPDOWN."+first.stream, nil)
			cancel()
			if err != nil {
				s.log.Note("step down leader of %s: %v", first.stream, err)
			}
			if _, err := waitStreamQuorum(ctx, js, first.stream, time.Minute, s.log.Note); err != nil {
				return first, err
			}
		}
	}
	return first, nil
}

// clientBrokers maps each service of sources to the broker its connection is on (the services
// name their NATS connection after themselves); a service not found is left out.
func (s *System) clientBrokers(ctx context.Context, sources []string) map[string]string {
	out := map[string]string{}
	for _, b := range s.Brokers {
		for _, source := range sources {
			if ok, err := b.HasClient(ctx, source); err == nil && ok {
				out[source] = b.Name
			}
		}
	}
	return out
}

// waitStreamLeader waits until stream has a leader and every replica is online and current,
// and returns the leader's server name.
func waitStreamLeader(ctx context.Context, js jetstream.JetStream, stream string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := js.Stream(reqCtx, stream)
		cancel()
		switch {
		case err != nil:
			last = err.Error()
		case st.CachedInfo().Cluster == nil || st.CachedInfo().Cluster.Leader == "":
			last = "no leader"
		default:
			cl := st.CachedInfo().Cluster
			ready := true
			for _, r := range cl.Replicas {
				if r.Offline || !r.Current {
					ready, last = false, fmt.Sprintf("leader %s, replica %s not current", cl.Leader, r.Name)
				}
			}
			if ready {
				return cl.Leader, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("stream %s not whole after %s: %s", stream, timeout, last)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return "", ctx.Err()
		}
	}
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
