// Package pgcluster starts a highly available PostgreSQL cluster of the tools' own on loopback
// ports: three PostgreSQL 15 servers under Patroni with one etcd (StartHA, for the chaos
// harness's failover scenario). A single server of our own is systemtest.StartCluster.
package pgcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"walletgl/internal/systemtest"
)

// HA is a highly available PostgreSQL cluster as operators run one, from Debian's packages: one
// etcd and three PostgreSQL servers, each under a Patroni of its own, all on loopback ports.
// Patroni elects the primary through etcd and keeps one standby synchronous
// (synchronous_mode_strict: a commit that returns is on the synchronous standby, and with
// none there is no commit). Its timing is production's scaled down (a leader key of 10 s
// instead of 30), so a lost primary is replaced in about 10–15 s.
type HA struct {
	Scope string
	Nodes []*Node

	dir     string
	bin     string
	owner   *syscall.Credential
	etcd    *process
	etcdURL string
	http    *http.Client
}

// Node is one PostgreSQL server of an HA cluster and the Patroni that manages it.
type Node struct {
	Name    string
	Port    int // PostgreSQL's
	APIPort int // Patroni's REST API

	ha      *HA
	dir     string
	mu      sync.Mutex
	patroni *process // nil while the node is down
}

// The DCS settings of the cluster: Patroni wants loop_wait + 2 × retry_timeout ≤ ttl.
const (
	leaderTTL    = 10 // seconds the leader key lives without a renewal: the failover's detection time
	loopWait     = 2
	retryTimeout = 4
	// maxLag is how far behind the leader, in bytes of WAL, a replica may be and still count
	// as whole (WaitWhole), and still be promoted (maximum_lag_on_failover).
	maxLag = 1 << 20
)

// HATools reports why an HA cluster cannot be started on this machine (Patroni, etcd or
// PostgreSQL's binaries missing), or nil.
func HATools() error {
	var missing []string
	for _, name := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	if _, err := systemtest.PostgresBin(); err != nil {
		missing = append(missing, "postgresql")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not installed (Debian: apt-get install patroni etcd-server postgresql)", strings.Join(missing, ", "))
	}
	return nil
}

// StartHA starts etcd and three Patroni nodes in a new temporary directory and waits until the
// cluster has a leader and a synchronous standby and every node runs; Stop stops it.
func StartHA(ctx context.Context) (*HA, error) {
	if err := HATools(); err != nil {
		return nil, fmt.Errorf("start an ha cluster: %w", err)
	}
	bin, err := systemtest.PostgresBin()
	if err != nil {
		return nil, err
	}
	h := &HA{Scope: "walletgl", bin: bin, http: &http.Client{Timeout: 60 * time.Second}}
	if h.owner, err = systemtest.PostgresUser(); err != nil {
		return nil, err
	}
	if h.dir, err = systemtest.PostgresDir("pgcluster-ha-", h.owner); err != nil {
		return nil, err
	}
	ports, err := freePorts(2 + 2*3)
	if err != nil {
		_ = os.RemoveAll(h.dir)
		return nil, err
	}
	if err := h.startEtcd(ctx, ports[0], ports[1]); err != nil {
		h.Stop(true)
		return nil, err
	}
	for i := range 3 {
		n := &Node{Name: fmt.Sprintf("pg-%d", i+1), Port: ports[2+2*i], APIPort: ports[3+2*i], ha: h}
		n.dir = filepath.Join(h.dir, n.Name)
		if err := h.mkdir(n.dir); err != nil {
			h.Stop(true)
			return nil, err
		}
		if err := n.writeConfig(); err != nil {
			h.Stop(true)
			return nil, err
		}
		h.Nodes = append(h.Nodes, n)
	}
	// The first node bootstraps alone, so that it is the one that runs initdb; the others
	// then clone it.
	for _, n := range h.Nodes {
		if err := n.Start(); err != nil {
			h.Stop(true)
			return nil, err
		}
		if n == h.Nodes[0] {
			if _, err := h.WaitLeader(ctx, 90*time.Second); err != nil {
				h.Stop(true)
				return nil, err
			}
		}
	}
	if _, err := h.WaitWhole(ctx, 2*time.Minute); err != nil {
		h.Stop(true)
		return nil, err
	}
	return h, nil
}

// Dir is where the cluster's data, configuration and logs are.
func (h *HA) Dir() string { return h.dir }

// URL is database db on the cluster's primary, whichever node that is, as the superuser: every
// node is listed, and target_session_attrs=read-write makes the driver connect to the one that
// takes writes.
func (h *HA) URL(db string) string {
	hosts := make([]string, len(h.Nodes))
	for i, n := range h.Nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.Port)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write", strings.Join(hosts, ","), db)
}

// URL is database db on this node alone, as the superuser.
func (n *Node) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.Port, db)
}

// Node returns the node named name, or nil.
func (h *HA) Node(name string) *Node {
	for _, n := range h.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Member is one node as Patroni's GET /cluster reports it.
type Member struct {
	Name     string `json:"name"`
	Role     string `json:"role"`  // leader, sync_standby, replica
	State    string `json:"state"` // running, streaming, starting, stopped, …
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"` // bytes behind the leader, or "unknown"
}

// Members is the cluster as a running node's Patroni sees it.
func (h *HA) Members(ctx context.Context) ([]Member, error) {
	var last error
	for _, n := range h.Nodes {
		if !n.Up() {
			continue
		}
		var body struct {
			Members []Member `json:"members"`
		}
		if last = n.api(ctx, http.MethodGet, "/cluster", nil, &body); last == nil {
			return body.Members, nil
		}
	}
	if last == nil {
		last = errors.New("no node is up")
	}
	return nil, fmt.Errorf("read the cluster's members: %w", last)
}

func running(m Member) bool { return m.State == "running" || m.State == "streaming" }

// WaitLeader waits up to timeout for a running leader and returns it.
func (h *HA) WaitLeader(ctx context.Context, timeout time.Duration) (*Node, error) {
	var leader *Node
	err := h.waitFor(ctx, timeout, func(ms []Member) string {
		for _, m := range ms {
			if m.Role == "leader" && running(m) {
				leader = h.Node(m.Name)
				return ""
			}
		}
		return "no running leader"
	})
	return leader, err
}

// WaitWhole waits up to timeout until every node runs, one is the leader and one its
// synchronous standby, and no replica is more than maxLag behind; it returns the leader.
func (h *HA) WaitWhole(ctx context.Context, timeout time.Duration) (*Node, error) {
	var leader *Node
	err := h.waitFor(ctx, timeout, func(ms []Member) string {
		leader = nil
		sync := false
		for _, m := range ms {
			switch {
			case !running(m):
				return fmt.Sprintf("%s %s", m.Name, m.State)
			case m.Role == "leader":
				leader = h.Node(m.Name)
			default:
				if lag, ok := m.Lag.(float64); !ok || lag > maxLag {
					return fmt.Sprintf("%s lags %v", m.Name, m.Lag)
				}
				sync = sync || m.Role == "sync_standby"
			}
		}
		switch {
		case len(ms) < len(h.Nodes):
			return fmt.Sprintf("%d of %d members", len(ms), len(h.Nodes))
		case leader == nil:
			return "no leader"
		case !sync:
			return "no synchronous standby"
		}
		return ""
	})
	return leader, err
}

// waitFor polls the members until ready has nothing to say against them.
func (h *HA) waitFor(ctx context.Context, timeout time.Duration, ready func([]Member) string) error {
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ms, err := h.Members(ctx)
		if err == nil {
			if last = ready(ms); last == "" {
				return nil
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ha cluster not ready after %s: %s (logs in %s)", timeout, last, h.dir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Switchover asks Patroni to hand the leader's role to candidate (a planned switchover: the
// leader shuts down cleanly once candidate has all its WAL) and returns when it is done.
func (h *HA) Switchover(ctx context.Context, leader, candidate *Node) error {
	req := map[string]string{"leader": leader.Name, "candidate": candidate.Name}
	if err := leader.api(ctx, http.MethodPost, "/switchover", req, nil); err != nil {
		return fmt.Errorf("switchover from %s to %s: %w", leader.Name, candidate.Name, err)
	}
	return nil
}

// Kill takes the node away as a lost machine goes: Patroni and then the PostgreSQL postmaster
// killed with SIGKILL (the postmaster's backends exit on their own once it is gone). Nothing
// renews the node's leader key, which expires after the DCS's ttl.
func (n *Node) Kill() error {
	n.mu.Lock()
	p := n.patroni
	n.patroni = nil
	n.mu.Unlock()
	if p != nil {
		p.kill()
	}
	pid, err := n.postmasterPID()
	if err != nil || pid == 0 {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill the postmaster of %s: %w", n.Name, err)
	}
	return nil
}

// StopReplay freezes (SIGSTOP) the node's startup process, the one that applies WAL on a
// standby: the node goes on receiving and flushing WAL, so a synchronous standby keeps
// acknowledging commits, and applies none of it until ResumeReplay: a standby that lags.
// pg_wal_replay_pause() would not hold: Patroni resumes a paused replay at its next loop.
func (n *Node) StopReplay() error {
	pid, err := n.startupPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop the replay of %s: %w", n.Name, err)
	}
	return nil
}

// ResumeReplay lets the node's startup process go on (SIGCONT).
func (n *Node) ResumeReplay() error {
	pid, err := n.startupPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume the replay of %s: %w", n.Name, err)
	}
	return nil
}

// startupPID finds the postmaster's child whose title says it is the startup process.
func (n *Node) startupPID() (int, error) {
	postmaster, err := n.postmasterPID()
	if err != nil {
		return 0, err
	}
	if postmaster == 0 {
		return 0, fmt.Errorf("%s: no postmaster runs", n.Name)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after its closing parenthesis.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(postmaster) {
			continue
		}
		title, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(title), ": startup") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("%s: no startup process (not a standby?)", n.Name)
}

// Start starts the node's Patroni, which starts its PostgreSQL: the cluster's leader if there
// is none, otherwise a replica of the leader (rewound first when it was a primary that lost
// its role).
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.patroni != nil {
		return nil
	}
	patroni, err := exec.LookPath("patroni")
	if err != nil {
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	p, err := startProcess(n.ha.owner, filepath.Join(n.dir, "patroni.log"), patroni, filepath.Join(n.dir, "patroni.yml"))
	if err != nil {
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	n.patroni = p
	return nil
}

// Up reports whether the node's Patroni runs.
func (n *Node) Up() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.patroni != nil && !n.patroni.exited()
}

// postmasterPID reads the running postmaster's pid (0: none).
func (n *Node) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.dir, "data", "postmaster.pid"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the postmaster's pid of %s: %w", n.Name, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("read the postmaster's pid of %s: %w", n.Name, err)
	}
	return pid, nil
}

// Stop stops every Patroni (each stops its PostgreSQL) and etcd, and removes the cluster's
// directory unless keep.
func (h *HA) Stop(keep bool) {
	var wg sync.WaitGroup
	for _, n := range h.Nodes {
		n.mu.Lock()
		p := n.patroni
		n.patroni = nil
		n.mu.Unlock()
		if p != nil {
			wg.Go(func() { p.stop(30 * time.Second) })
		}
	}
	wg.Wait()
	// A postmaster whose Patroni was killed outlives it: stop what is left.
	for _, n := range h.Nodes {
		if pid, err := n.postmasterPID(); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGQUIT)
		}
	}
	if h.etcd != nil {
		h.etcd.stop(10 * time.Second)
	}
	if !keep {
		_ = os.RemoveAll(h.dir)
	}
}

func (h *HA) startEtcd(ctx context.Context, clientPort, peerPort int) error {
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	data := filepath.Join(h.dir, "etcd")
	if err := h.mkdir(data); err != nil {
		return err
	}
	h.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	h.etcd, err = startProcess(h.owner, filepath.Join(h.dir, "etcd.log"), etcd,
		"--name", "etcd-1", "--data-dir", data,
		"--listen-client-urls", h.etcdURL, "--advertise-client-urls", h.etcdURL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "etcd-1="+peer, "--initial-cluster-state", "new")
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var health struct {
			Health string `json:"health"`
		}
		err := getJSON(ctx, h.http, h.etcdURL+"/health", &health)
		if err == nil && health.Health == "true" {
			return nil
		}
		if time.Now().After(deadline) || h.etcd.exited() {
			return fmt.Errorf("etcd not healthy (%v): see %s", err, filepath.Join(h.dir, "etcd.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeConfig writes the node's Patroni configuration. YAML is a superset of JSON: the
// configuration is written as JSON, from Go values, with nothing to quote by hand.
func (n *Node) writeConfig() error {
	h := n.ha
	// Production's settings where they matter to what the harness measures: autovacuum on,
	// durable and synchronous commits, WAL for rewinds; sizes small for a shared 2-core machine.
	parameters := map[string]any{
		"max_connections":       100,
		"shared_buffers":        "64MB",
		"autovacuum":            "on",
		"fsync":                 "on",
		"synchronous_commit":    "on",
		"wal_level":             "replica",
		"hot_standby":           "on",
		"max_wal_senders":       10,
		"max_replication_slots": 10,
		"wal_keep_size":         "256MB",
		"log_min_messages":      "warning",
		// A standby whose primary went away tries again for WAL after this (5 s by default): in
		// strict synchronous mode, the new primary takes no commit until a standby streams
		// from it.
		"wal_retrieve_retry_interval": "1s",
		"max_prepared_transactions":   0,
	}
	cfg := map[string]any{
		"scope":     h.Scope,
		"namespace": "/pgcluster/",
		"name":      n.Name,
		"log":       map[string]any{"level": "INFO"},
		"restapi": map[string]any{
			"listen":          fmt.Sprintf("127.0.0.1:%d", n.APIPort),
			"connect_address": fmt.Sprintf("127.0.0.1:%d", n.APIPort),
		},
		"etcd3": map[string]any{"hosts": []string{strings.TrimPrefix(h.etcdURL, "http://")}},
		"bootstrap": map[string]any{
			"dcs": map[string]any{
				"ttl": leaderTTL, "loop_wait": loopWait, "retry_timeout": retryTimeout,
				"maximum_lag_on_failover": maxLag,
				"synchronous_mode":        true,
				"synchronous_mode_strict": true,
				"postgresql": map[string]any{
					"use_pg_rewind": true,
					"use_slots":     true,
					"parameters":    parameters,
				},
			},
			"initdb": []any{map[string]string{"encoding": "UTF8"}, "data-checksums"},
		},
		"postgresql": map[string]any{
			"listen":          fmt.Sprintf("127.0.0.1:%d", n.Port),
			"connect_address": fmt.Sprintf("127.0.0.1:%d", n.Port),
			"data_dir":        filepath.Join(n.dir, "data"),
			"bin_dir":         h.bin,
			"pgpass":          filepath.Join(n.dir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]string{"username": "postgres"},
				"replication": map[string]string{"username": "postgres"},
				"rewind":      map[string]string{"username": "postgres"},
			},
			"parameters": map[string]any{"unix_socket_directories": n.dir},
			// Loopback only, and trust: the harness's cluster is reachable from this machine alone.
			"pg_hba": []string{
				"local all all trust",
				"host all all 127.0.0.1/32 trust",
				"host replication all 127.0.0.1/32 trust",
			},
			"remove_data_directory_on_rewind_failure":     true,
			"remove_data_directory_on_diverged_timelines": true,
		},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("write the configuration of %s: %w", n.Name, err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "patroni.yml"), b, 0o644); err != nil {
		return fmt.Errorf("write the configuration of %s: %w", n.Name, err)
	}
	return nil
}

// api calls the node's Patroni REST API with body (nil: none) and decodes its answer into out
// (nil: ignored); a status other than 2xx is an error with the answer's text.
func (n *Node) api(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, fmt.Sprintf("http://127.0.0.1:%d%s", n.APIPort, path), r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := n.ha.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func getJSON(ctx context.Context, c *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// mkdir makes a directory the cluster's user owns.
func (h *HA) mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	if h.owner != nil {
		if err := os.Chown(dir, int(h.owner.Uid), int(h.owner.Gid)); err != nil {
			return fmt.Errorf("make %s: %w", dir, err)
		}
	}
	return nil
}

// freePorts returns n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		addr, err := systemtest.FreeAddr()
		if err != nil {
			return nil, err
		}
		_, p, _ := net.SplitHostPort(addr)
		port, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("free port %q: %w", p, err)
		}
		if !seen[port] {
			seen[port] = true
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// process is a server the cluster runs: its own process group (a Ctrl-C of the harness
// reaches the harness alone, which then stops it), its output appended to a log file. The
// goroutine that waits for it is its owner's; done closes when it has exited.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProcess(owner *syscall.Credential, logPath, bin string, args ...string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to terminate and kills it when it has not after timeout.
func (p *process) stop(timeout time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
	}
}
