package envtest

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"walletgl/internal/systemtest"
)

// Broker is a JetStream server run inside the test process, for tests that must stop, restart
// or wipe a broker. It keeps its port across restarts, so clients reconnect to it.
type Broker struct {
	t    testing.TB
	opts server.Options
	srv  *server.Server
}

// StartBroker starts an embedded JetStream server on a free loopback port with its store in a
// temporary directory; it is shut down when the test ends. The port is below the kernel's
// ephemeral range (systemtest.ListenFree), so no client connection can take it while the broker
// is down for a restart. A test that needs users, TLS or both services reaching the broker at
// once runs a nats-server process instead (systemtest.StartBrokers, StartBrokerWithConfig).
func StartBroker(t testing.TB) *Broker {
	t.Helper()
	b := &Broker{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      freeBrokerPort(t),
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	b.start()
	t.Cleanup(b.Shutdown)
	return b
}

func freeBrokerPort(t testing.TB) int {
	t.Helper()
	ln, err := systemtest.ListenFree()
	if err != nil {
		t.Fatalf("find a port for the broker: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// URL is the client URL of the broker; it stays the same across restarts.
func (b *Broker) URL() string { return b.srv.ClientURL() }

func (b *Broker) start() {
	b.t.Helper()
	opts := b.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		b.t.Fatalf("new nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		b.t.Fatalf("nats server not ready")
	}
	b.srv = srv
}

// MapSubject has the broker deliver what is published on src to dest instead, as an account's
// subject mapping does: a JetStream publish to a mapped-away subject reaches no stream, and
// when something listens on dest, no error comes back either (a PubAck that is lost).
func (b *Broker) MapSubject(src, dest string) {
	b.t.Helper()
	if err := b.srv.GlobalAccount().AddMapping(src, dest); err != nil {
		b.t.Fatalf("map subject %s: %v", src, err)
	}
}

// Shutdown stops the broker, keeping its store.
func (b *Broker) Shutdown() {
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
}

// Restart stops the broker and starts it again on the same port with the same store.
func (b *Broker) Restart() {
	b.t.Helper()
	b.Shutdown()
	b.start()
}

// Wipe stops the broker, deletes its store and starts an empty one on the same port: a broker
// that lost what it had acknowledged.
func (b *Broker) Wipe() {
	b.t.Helper()
	b.Shutdown()
	if err := os.RemoveAll(b.opts.StoreDir); err != nil {
		b.t.Fatalf("wipe nats store: %v", err)
	}
	b.start()
}
