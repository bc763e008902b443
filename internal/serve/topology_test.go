package serve_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/serve"
	"walletgl/internal/systemtest"
)

// A broker that cannot answer for the topology yet is its own state, not the service's
// configuration: serve starts, says why in its log, and leaves the topology to the relay and
// the consumer, which retry. Here one node of a three-node cluster is up, alone, so no
// JetStream meta leader answers; and a broker whose store cannot hold the streams. (A user the
// broker denies the rights stops serve: clitest.BrokerUsers.)
func TestServeStartsWhenTheBrokerCannotAnswerForTheTopologyYet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) server.Options
		says string
	}{
		{name: "a cluster without a meta leader", opts: loneClusterNode,
			says: "the event topology could not be checked at start"},
		{name: "a store smaller than the streams", opts: smallStore,
			says: "could not be set up at start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := startEmbedded(t, tc.opts(t))
			nc, err := nats.Connect(srv.ClientURL())
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			var logged bytes.Buffer
			topo := events.Topology{Namespace: "checkstate", MaxBytes: 1 << 30}
			err = serve.CheckTopology(context.Background(), nc, topo, contract.SourceWallet, zerolog.New(&logged))
			require.NoError(t, err, "serve starts")
			require.Contains(t, logged.String(), tc.says)
			require.Contains(t, logged.String(), "the relay and the consumer keep trying")
		})
	}
}

// loneClusterNode is one node of a three-node cluster whose two peers never start.
func loneClusterNode(t *testing.T) server.Options {
	peers := []string{"nats://127.0.0.1:" + strconv.Itoa(freePort(t)), "nats://127.0.0.1:" + strconv.Itoa(freePort(t))}
	return server.Options{
		ServerName: "lone", JetStream: true,
		Cluster: server.ClusterOpts{Name: "checkstate", Host: "127.0.0.1", Port: freePort(t)},
		Routes:  server.RoutesFromStr(peers[0] + "," + peers[1]),
	}
}

// smallStore is a single server whose JetStream store holds 1 MiB.
func smallStore(*testing.T) server.Options {
	return server.Options{JetStream: true, JetStreamMaxStore: 1 << 20}
}

func startEmbedded(t *testing.T, opts server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", freePort(t), t.TempDir(), true, true
	srv, err := server.NewServer(&opts)
	require.NoError(t, err)
	go srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second), "nats server ready")
	t.Cleanup(srv.Shutdown)
	return srv
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := systemtest.ListenFree()
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
