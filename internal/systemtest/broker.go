package systemtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// NATSServerBinary returns the nats-server to run: NATS_SERVER_BIN when set (for example
// Debian's 2.9 at /usr/sbin/nats-server), else one built from the module's nats-server into dir.
func NATSServerBinary(ctx context.Context, dir string) (string, error) {
	if bin := os.Getenv("NATS_SERVER_BIN"); bin != "" {
		return bin, nil
	}
	out := filepath.Join(dir, "nats-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/nats-io/nats-server/v2")
	if root, err := ModuleRoot(ctx); err == nil {
		cmd.Dir = root
	}
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build nats-server: %w\n%s", err, output)
	}
	return out, nil
}

// Broker is a nats-server process with JetStream whose store the harness controls: it can be
// stopped, killed, restarted on the same port and wiped. Its Name is also its server name
// (`-n`), the name JetStream reports as a stream's leader or replica.
type Broker struct {
	*Process
	ClientPort int
	StoreDir   string
	// Clustered is a node of a cluster: it is ready once it knows the JetStream meta leader.
	Clustered bool
}

// StartBrokers starts n nats-server processes with JetStream, their stores and logs in dir: one
// plain server, or a cluster of n on loopback. A start that fails (a port taken by another
// process between its choice and the server's bind) is tried again on other ports.
func StartBrokers(ctx context.Context, bin, dir string, n int) ([]*Broker, error) {
	return startBrokers(ctx, bin, dir, n, nil)
}

// StartBrokerWithConfig starts one nats-server process with JetStream that also reads the
// configuration file conf (TLS, users and their permissions): the harness's flags set its
// ports, store and name, the file the rest.
func StartBrokerWithConfig(ctx context.Context, bin, dir, conf string) (*Broker, error) {
	brokers, err := startBrokers(ctx, bin, dir, 1, []string{"-c", conf})
	if err != nil {
		return nil, err
	}
	return brokers[0], nil
}

func startBrokers(ctx context.Context, bin, dir string, n int, extra []string) ([]*Broker, error) {
	const attempts = 3
	var err error
	for range attempts {
		var brokers []*Broker
		if brokers, err = startBrokersOnce(ctx, bin, dir, n, extra); err == nil {
			return brokers, nil
		}
		for _, b := range brokers {
			_ = b.Kill()
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// startBrokersOnce starts the n brokers on fresh ports, extra added to each one's flags; on
// failure it returns those it started, for the caller to stop.
func startBrokersOnce(ctx context.Context, bin, dir string, n int, extra []string) ([]*Broker, error) {
	flat, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	ports := make([][3]int, n) // client, monitor, cluster
	for i := range ports {
		copy(ports[i][:], flat[3*i:3*i+3])
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p[2]))
	}
	brokers := make([]*Broker, 0, n)
	for i, p := range ports {
		name := fmt.Sprintf("nats-%d", i+1)
		store := filepath.Join(dir, name)
		if err := os.RemoveAll(store); err != nil { // a failed attempt's
			return brokers, err
		}
		args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(p[0]), "-m", strconv.Itoa(p[1]), "-js", "-sd", store, "-n", name}
		if n > 1 {
			args = append(args, "--cluster_name", "harness", "--cluster", "nats://127.0.0.1:"+strconv.Itoa(p[2]),
				"--routes", strings.Join(routes, ","))
		}
		args = append(args, extra...)
		b := &Broker{
			Process: &Process{Name: name, Bin: bin, Args: args, Addr: "127.0.0.1:" + strconv.Itoa(p[1]),
				Log: filepath.Join(dir, name+".log")},
			ClientPort: p[0], StoreDir: store, Clustered: n > 1,
		}
		if n > 1 {
			// A cluster node is ready once it is up and knows the JetStream meta leader
			// (waitReady). Every replica current as well (plain /healthz) is more than a node
			// coming back can promise: on nats-server 2.9 the replica of an idle consumer whose
			// leader moved meanwhile stays "not current" until the consumer's next ack or
			// delivery, for 30 s and more after the load has ended.
			b.HealthPath = "/healthz?js-server-only=true"
		}
		if err := b.Start(); err != nil {
			return brokers, err
		}
		brokers = append(brokers, b)
	}
	for _, b := range brokers {
		if err := b.waitReady(ctx); err != nil {
			return brokers, err
		}
	}
	return brokers, nil
}

// URL is the broker's client URL.
func (b *Broker) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(b.ClientPort) }

func (b *Broker) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := b.WaitHealthy(ctx); err != nil {
		return err
	}
	if !b.Clustered {
		return nil
	}
	return b.waitMetaLeader(ctx)
}

// waitMetaLeader polls the node's /jsz until it names the JetStream meta leader. Until then the
// cluster answers no JetStream request: a service that starts sooner waits for its stream
// lookups' timeouts. On current servers /healthz?js-server-only=true says nothing of the meta
// leader (nats-server 2.9's did), so the harness asks for it itself.
func (b *Broker) waitMetaLeader(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	return b.waitUntil(ctx, "in touch with a JetStream meta leader", func() error {
		leader, err := b.metaLeader(ctx, client)
		if err == nil && leader == "" {
			err = errors.New("no meta leader named")
		}
		return err
	})
}

func (b *Broker) metaLeader(ctx context.Context, client *http.Client) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.Addr+"/jsz", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var jsz struct {
		Meta *struct {
			Leader string `json:"leader"`
		} `json:"meta_cluster"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&jsz); err != nil {
		return "", fmt.Errorf("jsz of %s: %w", b.Name, err)
	}
	if jsz.Meta == nil {
		return "", nil
	}
	return jsz.Meta.Leader, nil
}

// Restart starts a stopped broker again with its store.
func (b *Broker) Restart(ctx context.Context) error {
	if err := b.Start(); err != nil {
		return err
	}
	return b.waitReady(ctx)
}

// Wipe deletes the store of a stopped broker: what it had acknowledged is gone.
func (b *Broker) Wipe() error {
	if b.Running() {
		return fmt.Errorf("wipe %s: still running", b.Name)
	}
	return os.RemoveAll(b.StoreDir)
}

// freePorts returns n distinct free loopback ports (ListenFree). Their listeners stay open until
// all n are chosen, so no port is handed out twice (a three-node cluster once got the same port
// for two of its nine listeners).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := ListenFree()
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// HasClient reports whether a client connection named name (nats.Name) is connected to this
// broker now, from its monitoring endpoint's /connz.
func (b *Broker) HasClient(ctx context.Context, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.Addr+"/connz?limit=4096", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("connz of %s: %w", b.Name, err)
	}
	defer resp.Body.Close()
	var connz struct {
		Connections []struct {
			Name string `json:"name"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&connz); err != nil {
		return false, fmt.Errorf("connz of %s: %w", b.Name, err)
	}
	for _, c := range connz.Connections {
		if c.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// BrokerNamed returns the broker whose server name is name, nil when none is.
func BrokerNamed(brokers []*Broker, name string) *Broker {
	for _, b := range brokers {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// URLs joins the brokers' client URLs the way NATS_URL takes them.
func URLs(brokers []*Broker) string {
	var us []string
	for _, b := range brokers {
		us = append(us, b.URL())
	}
	return strings.Join(us, ",")
}
