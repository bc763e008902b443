package chaos

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/systemtest"
	"walletgl/tools/internal/pgcluster"
)

// System is one run's world: two databases, the brokers, and the service processes.
type System struct {
	Dir              string
	WalletURL, GLURL string
	Brokers          []*systemtest.Broker
	Wallets, GLs     []*systemtest.Process
	WalletDB, GLDB   *pgxpool.Pool
	Namespace        string
	seed             uint64
	log              *Timeline

	// HA is the PostgreSQL cluster under Patroni that holds both databases in an HA scenario
	// (nil: the databases are on the server of Options.DatabaseURL).
	HA *pgcluster.HA

	mu        sync.Mutex
	failovers []Failover
	expecting map[*systemtest.Process]bool // processes the scenario stopped on purpose
	killed    map[*systemtest.Process]bool // processes the harness killed (the restart is no news)
}

// Topology of one scenario's system.
type Topology struct {
	WalletInstances, GLInstances, Brokers int
	// Env is added to both services' environment (settings and FAULTS for the scenario).
	WalletEnv, GLEnv []string
	// HA puts both databases on a PostgreSQL cluster of three under Patroni, which the run
	// starts (pgcluster.StartHA); the services reach it by a multi-host URL.
	HA bool
}

func startSystem(ctx context.Context, opts Options, topo Topology, dir string, bins systemtest.Binaries, natsBin string, tl *Timeline) (*System, error) {
	s := &System{Dir: dir, log: tl, expecting: map[*systemtest.Process]bool{}, killed: map[*systemtest.Process]bool{}, Namespace: "chaos", seed: opts.Seed}
	id := strings.ToLower(filepath.Base(dir))
	id = strings.NewReplacer("-", "_", ".", "_").Replace(id)
	var err error
	if s.WalletURL, err = systemtest.DatabaseURL(opts.DatabaseURL, "chaos_"+id+"_wallet"); err != nil {
		return nil, err
	}
	if s.GLURL, err = systemtest.DatabaseURL(opts.DatabaseURL, "chaos_"+id+"_gl"); err != nil {
		return nil, err
	}
	if s.Brokers, err = systemtest.StartBrokers(ctx, natsBin, dir, max(topo.Brokers, 1)); err != nil {
		return nil, err
	}
	// Signed events, as in production: each service signs with its own key and trusts the other's.
	keys, err := systemtest.MakeEventKeys(ctx, bins, filepath.Join(dir, "keys"))
	if err != nil {
		return nil, err
	}
	replicas := "1"
	if len(s.Brokers) >= 3 {
		replicas = "3"
	}
	common := []string{
		"NATS_URL=" + systemtest.URLs(s.Brokers), "EVENTS_NAMESPACE=" + s.Namespace, "EVENTS_STREAM_REPLICAS=" + replicas,
		"LOG_FORMAT=json", "LOG_LEVEL=info", "FAULTS_SEED=" + fmt.Sprint(opts.Seed),
		"WALLET_RATE_LIMIT=1000000:1000000", // one key drives the load: no 429 among the faults
		"WALLET_HOLD_EXPIRY_INTERVAL=1s",    // the load's expiring holds are voided within the run
		"EVENTS_POLL_INTERVAL=500ms", "EVENTS_ACK_TIMEOUT=4s", "EVENTS_LEASE=3s", "EVENTS_ACK_WAIT=4s",
		"EVENTS_MAX_ATTEMPTS=1000", "EVENTS_MAX_DELIVER=1000",
	}
	for i := range max(topo.WalletInstances, 1) {
		p, err := s.process(fmt.Sprintf("wallet-%d", i+1), bins.Wallet, "WALLET", s.WalletURL, slices.Concat(keys.Env(contract.SourceWallet), common, topo.WalletEnv))
		if err != nil {
			return nil, err
		}
		s.Wallets = append(s.Wallets, p)
	}
	for i := range max(topo.GLInstances, 1) {
		p, err := s.process(fmt.Sprintf("gl-%d", i+1), bins.GL, "GL", s.GLURL, slices.Concat(keys.Env(contract.SourceGL), common, topo.GLEnv))
		if err != nil {
			return nil, err
		}
		s.GLs = append(s.GLs, p)
	}
	// The first instance of each creates and migrates its database; the others follow.
	for _, group := range [][]*systemtest.Process{s.Wallets, s.GLs} {
		for _, p := range group {
			if err := s.startAndWait(ctx, p); err != nil {
				return nil, err
			}
		}
	}
	if s.WalletDB, err = database.Open(ctx, s.WalletURL, 4); err != nil {
		return nil, err
	}
	if s.GLDB, err = database.Open(ctx, s.GLURL, 4); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *System) process(name, bin, prefix, dbURL string, env []string) (*systemtest.Process, error) {
	return systemtest.Service(name, bin, prefix, dbURL, s.Dir, env)
}

func (s *System) startAndWait(ctx context.Context, p *systemtest.Process) error {
	if err := p.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return p.WaitHealthy(ctx)
}

// supervise restarts services that die while the scenario did not stop them (a crash fault
// point fired), as an orchestrator would, and records each crash.
func (s *System) supervise(ctx context.Context) {
	var wg sync.WaitGroup
	for _, p := range append(append([]*systemtest.Process{}, s.Wallets...), s.GLs...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			restarts := 0
			for {
				select {
				case <-ctx.Done():
					return
				case <-p.Exited():
				}
				if s.isExpected(p) {
					select {
					case <-ctx.Done():
						return
					case <-time.After(50 * time.Millisecond):
						continue
					}
				}
				if s.takeKilled(p) {
					s.log.Note("restarting %s", p.Name)
				} else {
					s.log.Fault("%s crashed at an armed fault point; restarting it", p.Name)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(200 * time.Millisecond):
				}
				// A new seed per start: the same seed would crash every restart at the same step.
				restarts++
				p.Env = append(p.Env, fmt.Sprintf("FAULTS_SEED=%d", s.seed+uint64(restarts)*7919))
				if err := s.startAndWait(ctx, p); err != nil && ctx.Err() == nil {
					first, _, _ := strings.Cut(err.Error(), "\n")
					s.log.Note("restart %s: %s", p.Name, first)
				}
			}
		}()
	}
	wg.Wait()
}

func (s *System) isExpected(p *systemtest.Process) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expecting[p]
}

// Down marks p as stopped on purpose, so the supervisor leaves it alone.
func (s *System) hold(p *systemtest.Process, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expecting[p] = held
}

// Kill9 kills a service with SIGKILL; the supervisor restarts it unless keepDown.
func (s *System) Kill9(p *systemtest.Process, keepDown bool) {
	s.mu.Lock()
	s.expecting[p], s.killed[p] = keepDown, true
	s.mu.Unlock()
	_ = p.Kill()
}

func (s *System) takeKilled(p *systemtest.Process) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.killed[p]
	delete(s.killed, p)
	return k
}

func (s *System) adminURL() string {
	u, _ := url.Parse(s.WalletURL)
	u.Path = "/postgres"
	return u.String()
}

// jetStream connects the harness itself to the brokers, for scenarios that read or change the
// streams behind the services' backs. It reconnects without limit, as the services do, so it
// outlives a killed node; close releases the connection.
func (s *System) jetStream() (js jetstream.JetStream, close func(), err error) {
	nc, err := nats.Connect(systemtest.URLs(s.Brokers), nats.Name("chaos-harness"),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return nil, nil, fmt.Errorf("connect the harness to nats: %w", err)
	}
	if js, err = jetstream.New(nc); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream context: %w", err)
	}
	return js, nc.Close, nil
}

// streamName is the name of source's stream in this run's namespace.
func (s *System) streamName(source string) string {
	return events.Topology{Namespace: s.Namespace}.StreamName(source)
}

func dbName(dbURL string) string {
	u, err := url.Parse(dbURL)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// StopAll stops every process gracefully and closes the pools.
func (s *System) StopAll() []error {
	var errs []error
	for _, p := range append(append([]*systemtest.Process{}, s.Wallets...), s.GLs...) {
		s.hold(p, true)
		if err := p.Stop(20 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, b := range s.Brokers {
		_ = b.Stop(10 * time.Second)
	}
	if s.WalletDB != nil {
		s.WalletDB.Close()
	}
	if s.GLDB != nil {
		s.GLDB.Close()
	}
	return errs
}

// DropDatabases removes the run's databases.
func (s *System) DropDatabases(ctx context.Context) {
	_ = database.Drop(ctx, s.WalletURL)
	_ = database.Drop(ctx, s.GLURL)
}
