package events_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"walletgl/internal/database"
	"walletgl/internal/envtest"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/internal/eventsdb"
	"walletgl/internal/events/outbox"
)

type testBundle struct {
	pool *pgxpool.Pool
	nc   *nats.Conn
	js   jetstream.JetStream
	topo events.Topology
	log  zerolog.Logger
	keys envtest.EventKeys // each relay signs with its source's key; consumers trust both
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool, _ := envtest.MigratedPool(t, "wallet")
	return setupWithNATS(t, pool, envtest.NATSURL(t))
}

func setupWithNATS(t *testing.T, pool *pgxpool.Pool, natsURL string) *testBundle {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	nc, err := events.Connect(context.Background(), natsURL, t.Name(), log)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	topo := envtest.Topology(t, natsURL)
	require.NoError(t, topo.EnsureStreams(context.Background(), js))
	return &testBundle{pool: pool, nc: nc, js: js, topo: topo, log: log, keys: envtest.NewEventKeys(t)}
}

// publish sends body on subject under msgID, signed by service as its relay signs.
func (b *testBundle) publish(t *testing.T, service, subject string, body []byte, msgID string) {
	t.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = body
	b.keys.Signer(service).Sign(msg)
	_, err := b.js.PublishMsg(context.Background(), msg, jetstream.WithMsgID(msgID))
	require.NoError(t, err)
}

func (b *testBundle) addEvents(t *testing.T, n int) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	box := outbox.New(contract.SourceWallet)
	ids := make([]uuid.UUID, n)
	err := database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		for i := range ids {
			ids[i] = uuid.Must(uuid.NewV7())
			_, err := box.Add(ctx, tx, outbox.Event{
				ID: ids[i], Type: contract.TypeTransferCompleted, AggregateID: uuid.NewString(), Time: time.Now(),
				Data: contract.TransferCompleted{TransferID: uuid.NewString(), FromWalletID: "a", ToWalletID: "b",
					Amount: int64(i + 1), Currency: "USD", CreatedAt: time.Now()},
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	return ids
}

func (b *testBundle) relay(t *testing.T, cfg outbox.RelayConfig) *outbox.Relay {
	t.Helper()
	cfg.Source = contract.SourceWallet
	if cfg.Signer == nil {
		cfg.Signer = b.keys.Wallet
	}
	r, err := outbox.NewRelay(cfg, b.topo, b.pool, b.nc, b.log)
	require.NoError(t, err)
	return r
}

func (b *testBundle) streamMessages(t *testing.T) uint64 {
	t.Helper()
	s, err := b.js.Stream(context.Background(), b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	return info.State.Msgs
}

func (b *testBundle) statusCounts(t *testing.T) map[string]int64 {
	t.Helper()
	rows, err := eventsdb.New(b.pool).OutboxStatusCounts(context.Background())
	require.NoError(t, err)
	counts := map[string]int64{}
	for _, r := range rows {
		counts[r.Status] = r.Count
	}
	return counts
}

func TestRelayPublishesEachRowWithItsIDAsMsgID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.addEvents(t, 3)
	relay := b.relay(t, outbox.RelayConfig{})

	n, err := relay.DispatchOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, map[string]int64{"dispatched": 3}, b.statusCounts(t))

	s, err := b.js.Stream(context.Background(), b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	for i, id := range ids {
		msg, err := s.GetMsg(context.Background(), uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, id.String(), msg.Header.Get(jetstream.MsgIDHeader))
		require.Equal(t, b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted), msg.Subject)
		env, err := contract.DecodeEnvelope(msg.Data)
		require.NoError(t, err)
		require.Equal(t, id.String(), env.ID)
		row, err := eventsdb.New(b.pool).GetOutbox(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, int64(i+1), *row.StreamSeq)
		require.Equal(t, int32(1), row.Attempts)
	}
}

func TestCatchUpLeavesAnEventTheStreamStillHoldsForItsConsumerHoweverLongItIsAway(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A duplicate window far shorter than the consumer's absence: a re-publish past it would be
	// stored as a second copy.
	b.topo.DuplicateWindow = 200 * time.Millisecond // lower than the stream's: set on the stream as an operator would
	b.editStream(t, contract.SourceWallet, func(c *jetstream.StreamConfig) { c.Duplicates = 200 * time.Millisecond })
	ids := b.addEvents(t, 5)
	relay := b.relay(t, outbox.RelayConfig{AckTimeout: 50 * time.Millisecond})
	_, err := relay.DispatchOnce(context.Background())
	require.NoError(t, err)
	checked := b.outboxStatus(t, ids[0]).CheckedAt

	for range 6 { // many acknowledgment timeouts and duplicate windows
		time.Sleep(100 * time.Millisecond)
		n, err := relay.CatchUpOnce(context.Background())
		require.NoError(t, err)
		require.Zero(t, n, "the stream holds every message: nothing is published again")
	}
	require.Equal(t, uint64(5), b.streamMessages(t), "one stored copy of each waiting event")
	require.Zero(t, relay.Stats().Republished)
	require.Equal(t, map[string]int64{"dispatched": 5}, b.statusCounts(t))
	require.True(t, b.outboxStatus(t, ids[0]).CheckedAt.After(*checked), "catch-up noted that it looked")
}

func TestSeveralRelaysNeverPublishARowTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.addEvents(t, 600)
	relays := []*outbox.Relay{b.relay(t, outbox.RelayConfig{BatchSize: 50}), b.relay(t, outbox.RelayConfig{BatchSize: 50}), b.relay(t, outbox.RelayConfig{BatchSize: 50})}

	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := r.DispatchOnce(context.Background())
				if err != nil {
					t.Errorf("dispatch: %v", err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()

	var published, dups int64
	for _, r := range relays {
		published += r.Stats().Published
		dups += r.Stats().Duplicates
	}
	require.Equal(t, int64(600), published)
	require.Zero(t, dups, "no row was published by two relays")
	require.Equal(t, uint64(600), b.streamMessages(t))
	require.Equal(t, map[string]int64{"dispatched": 600}, b.statusCounts(t))
}

func TestConsumerRecognisesADuplicateAndNeverHandlesItAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.addEvents(t, 10)
	relay := b.relay(t, outbox.RelayConfig{})
	_, err := relay.DispatchOnce(context.Background())
	require.NoError(t, err)

	// The same event published again under another message id slips past the broker's dedupe:
	// only the inbox can stop it.
	row, err := eventsdb.New(b.pool).GetOutbox(context.Background(), ids[3])
	require.NoError(t, err)
	b.publish(t, contract.SourceWallet, b.topo.Subject(contract.SourceWallet, contract.TypeTransferCompleted), row.Payload, "another-"+ids[3].String())

	var handled sync.Map
	var calls atomic.Int64
	handler := inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
		calls.Add(1)
		if _, loaded := handled.LoadOrStore(env.ID, true); loaded {
			t.Errorf("event %s handled twice", env.ID)
		}
		return nil
	})
	cons := b.consumer(t, "gl", handler)
	stop := runInBackground(t, cons.Run)
	require.Eventually(t, func() bool { return cons.Stats().Processed+cons.Stats().Duplicates == 11 }, 20*time.Second, 20*time.Millisecond)
	stop()

	require.Equal(t, int64(10), calls.Load())
	require.Equal(t, int64(1), cons.Stats().Duplicates)
	inbox, err := eventsdb.New(b.pool).GetInbox(context.Background(), "gl:"+ids[3].String())
	require.NoError(t, err)
	require.Equal(t, "processed", inbox.Status)
	require.Equal(t, int32(1), inbox.Duplicates)
}

func (b *testBundle) consumer(t *testing.T, name string, h inbox.Handler) *inbox.Consumer {
	t.Helper()
	c, err := inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: name, Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted},
		RetryDelay:   50 * time.Millisecond,
		Trust:        b.keys.Trust,
	}, b.topo, b.nc, b.pool, h, b.log)
	require.NoError(t, err)
	return c
}

// runInBackground runs fn until the returned stop is called (or the test ends) and waits for it.
func runInBackground(t *testing.T, fn func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

var _ = json.Marshal

// The wallet's durable consumer takes every version of the acknowledgment it knows — the GL's
// TransferPosted.v2 and the .v1 of a GL not yet upgraded — from one filter, and records a version
// it does not know failed (malformed) without handing it to its handler.
func TestTheWalletsConsumerTakesBothVersionsOfTheAcknowledgment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec, err := b.topo.Consumer(events.ConsumerWallet)
	require.NoError(t, err)
	require.True(t, spec.Takes(contract.TypeTransferPosted) && spec.Takes(contract.TypeTransferPostedV2))
	require.False(t, spec.Takes("TransferPosted.v3"))

	body := func(eventType string) ([]byte, string) {
		id := uuid.NewString()
		raw, err := json.Marshal(contract.Envelope{SpecVersion: "1.0", ID: id, Source: contract.SourceGL, Type: eventType,
			Time: time.Now().UTC(), DataContentType: "application/json", Data: json.RawMessage(`{}`)})
		require.NoError(t, err)
		return raw, id
	}
	var sent []string
	for _, eventType := range []string{contract.TypeTransferPosted, contract.TypeTransferPostedV2, "TransferPosted.v3"} {
		raw, id := body(eventType)
		b.publish(t, contract.SourceGL, b.topo.Subject(contract.SourceGL, eventType), raw, id)
		sent = append(sent, id)
	}

	var handled sync.Map
	cons, err := inbox.NewConsumer(inbox.ConsumerConfig{ConsumerSpec: spec, RetryDelay: 50 * time.Millisecond, Trust: b.keys.Trust},
		b.topo, b.nc, b.pool, inbox.HandlerFunc(func(ctx context.Context, tx pgx.Tx, env contract.Envelope) error {
			handled.Store(env.Type, env.ID)
			return nil
		}), b.log)
	require.NoError(t, err)
	stop := runInBackground(t, cons.Run)
	require.Eventually(t, func() bool { return cons.Stats().Processed == 2 && cons.Stats().Failed == 1 }, 20*time.Second, 20*time.Millisecond)
	stop()

	for i, eventType := range []string{contract.TypeTransferPosted, contract.TypeTransferPostedV2} {
		id, ok := handled.Load(eventType)
		require.True(t, ok, eventType)
		require.Equal(t, sent[i], id)
	}
	_, ok := handled.Load("TransferPosted.v3")
	require.False(t, ok, "an unknown version never reaches the handler")
	failed, err := eventsdb.New(b.pool).GetInbox(context.Background(), events.ConsumerWallet+":"+sent[2])
	require.NoError(t, err)
	require.Equal(t, "failed", failed.Status)
	require.Equal(t, contract.ReasonMalformed, *failed.Reason)
}
