package events_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/database"
	"walletgl/internal/events"
	"walletgl/internal/events/contract"
	"walletgl/internal/events/inbox"
	"walletgl/internal/events/outbox"
	"walletgl/internal/events/signing"
	"walletgl/internal/tracing"
)

// traceRecorder is a handler that keeps the trace context each event reaches it with.
type traceRecorder struct {
	mu  sync.Mutex
	got map[string]string // event id -> contract.Envelope.TraceParent
}

func (h *traceRecorder) Handle(_ context.Context, _ pgx.Tx, envs []contract.Envelope) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, env := range envs {
		h.got[env.ID] = env.TraceParent
	}
	return nil
}

func (h *traceRecorder) traceParent(id uuid.UUID) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	tp, ok := h.got[id.String()]
	return tp, ok
}

// A row written with a trace context is published under a publish span, its child, whose
// context the message's headers carry; the consumer continues it with a consume span and a post
// span, and hands the post span's context to the handler. A row without one is neither traced
// nor given a header.
func TestTheRelayAndTheConsumerContinueTheTraceARowStores(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	exporter := tracetest.NewInMemoryExporter()
	tp := tracing.NewWithExporter("wallet", exporter)

	writer, span := tp.Tracer("test").Start(ctx, "writer")
	span.End()
	tracedID, untracedID := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	box := outbox.New(contract.SourceWallet)
	require.NoError(t, database.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		for id, parent := range map[uuid.UUID]string{tracedID: tracing.TraceParent(writer), untracedID: ""} {
			_, err := box.Add(ctx, tx, outbox.Event{
				ID: id, Type: contract.TypeTransferCompleted, AggregateID: uuid.NewString(), Time: time.Now(), TraceParent: parent,
				Data: contract.TransferCompleted{TransferID: uuid.NewString(), FromWalletID: "a", ToWalletID: "b", Amount: 1, Currency: "USD", CreatedAt: time.Now()},
			})
			if err != nil {
				return err
			}
		}
		return nil
	}))

	relay := b.relay(t, outbox.RelayConfig{Tracing: tp})
	_, err := relay.DispatchOnce(ctx)
	require.NoError(t, err)

	h := &traceRecorder{got: map[string]string{}}
	c, err := inbox.NewConsumer(inbox.ConsumerConfig{
		ConsumerSpec: events.ConsumerSpec{Name: "traced", Source: contract.SourceWallet, EventType: contract.TypeTransferCompleted},
		Trust:        b.keys.Trust, Tracing: tp,
	}, b.topo, b.nc, b.pool, h, b.log)
	require.NoError(t, err)
	stop := runInBackground(t, c.Run)
	require.Eventually(t, func() bool {
		_, traced := h.traceParent(tracedID)
		_, untraced := h.traceParent(untracedID)
		return traced && untraced
	}, 20*time.Second, 20*time.Millisecond)
	stop()

	untracedTP, _ := h.traceParent(untracedID)
	require.Empty(t, untracedTP, "an untraced row stays untraced")

	spans := map[string]tracetest.SpanStub{}
	for _, s := range exporter.GetSpans() {
		require.Equal(t, span.SpanContext().TraceID(), s.SpanContext.TraceID(), "%s is in the row's trace", s.Name)
		spans[s.Name] = s
	}
	for child, parent := range map[string]string{
		tracing.SpanPublish: "writer", tracing.SpanConsume: tracing.SpanPublish, tracing.SpanPost: tracing.SpanConsume,
	} {
		require.Contains(t, spans, child)
		require.Equal(t, spans[parent].SpanContext.SpanID(), spans[child].Parent.SpanID(), "%s is the child of %s", child, parent)
	}
	require.Equal(t, trace.SpanKindProducer, spans[tracing.SpanPublish].SpanKind)
	require.Equal(t, trace.SpanKindConsumer, spans[tracing.SpanConsume].SpanKind)
	tracedTP, _ := h.traceParent(tracedID)
	post := spans[tracing.SpanPost].SpanContext
	require.Equal(t, "00-"+post.TraceID().String()+"-"+post.SpanID().String()+"-01", tracedTP, "the handler gets the post span's context")
	require.Len(t, exporter.GetSpans(), 4, "writer, publish, consume, post: nothing for the untraced row")

	// The traced row's message carries the publish span's context in its headers, beside the
	// signature; the untraced row's has none. The test's stream holds these two messages alone.
	stream, err := b.js.Stream(ctx, b.topo.StreamName(contract.SourceWallet))
	require.NoError(t, err)
	headers := map[string]string{} // Nats-Msg-Id -> traceparent
	for seq := uint64(1); seq <= 2; seq++ {
		raw, err := stream.GetMsg(ctx, seq)
		require.NoError(t, err)
		require.NotEmpty(t, raw.Header.Get(signing.HeaderSignature), "signed as before")
		headers[raw.Header.Get("Nats-Msg-Id")] = raw.Header.Get(tracing.HeaderTraceParent)
	}
	pub := spans[tracing.SpanPublish].SpanContext
	require.Equal(t, map[string]string{
		tracedID.String():   "00-" + pub.TraceID().String() + "-" + pub.SpanID().String() + "-01",
		untracedID.String(): "",
	}, headers)
}
