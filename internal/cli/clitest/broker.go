package clitest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events"
)

// Broker gives the test the pipeline's streams and both durable consumers on the test broker, in
// a namespace of its own, then publishes pending[source] messages on source's stream
// (contract.SourceWallet, contract.SourceGL): the durable consumer reading that stream has them
// pending. It returns the settings that point a command at them (NATS_URL, EVENTS_NAMESPACE).
func Broker(t *testing.T, pending map[string]int) map[string]string {
	t.Helper()
	url := envtest.NATSURL(t)
	topo := envtest.Topology(t, url)
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{events.ConsumerGL, events.ConsumerWallet} {
		spec, err := topo.Consumer(name)
		require.NoError(t, err)
		_, err = topo.EnsureConsumer(ctx, js, spec)
		require.NoError(t, err)
		for i := range pending[spec.Source] {
			_, err := js.Publish(ctx, topo.Subject(spec.Source, spec.EventType), []byte(`{}`), jetstream.WithMsgID(fmt.Sprintf("%s-%d", name, i)))
			require.NoError(t, err)
		}
	}
	return map[string]string{"NATS_URL": url, "EVENTS_NAMESPACE": topo.Namespace}
}
