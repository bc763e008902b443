package posting_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
)

// liveBroker is the real JetStream a consumer test runs against: the test's own streams, a
// connection, the services' event keys, and publish, which sends an envelope as the wallet
// does (signed, its id as Nats-Msg-Id).
type liveBroker struct {
	topo    events.Topology
	keys    envtest.EventKeys
	log     zerolog.Logger
	nc      *nats.Conn
	js      jetstream.JetStream
	publish func(env contract.Envelope)
}

func newLiveBroker(t *testing.T) liveBroker {
	t.Helper()
	ctx := context.Background()
	natsURL := envtest.NATSURL(t)
	b := liveBroker{
		topo: envtest.Topology(t, natsURL),
		keys: envtest.NewEventKeys(t),
		log:  zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
	}
	nc, err := events.Connect(ctx, natsURL, t.Name(), b.log)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, b.topo.EnsureStreams(ctx, js))
	b.nc, b.js = nc, js
	b.publish = func(env contract.Envelope) {
		t.Helper()
		body, err := json.Marshal(env)
		require.NoError(t, err)
		msg := nats.NewMsg(b.topo.Subject(contract.SourceWallet, env.Type))
		msg.Data = body
		b.keys.Signer(contract.SourceWallet).Sign(msg)
		_, err = js.PublishMsg(ctx, msg, jetstream.WithMsgID(env.ID))
		require.NoError(t, err)
	}
	return b
}
