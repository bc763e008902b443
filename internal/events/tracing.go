package events

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/tracing"
)

// A transfer's trace goes through the events: the outbox row stores the traceparent of the span
// that wrote it, the relay publishes the row under a publish span that continues it and puts
// that span's context into the message's headers (beside the signature, which covers the body
// alone), and the consumer continues it with a consume span per message and a span per event
// for the transaction that applies it. Rows and messages without a trace context are not
// traced: nothing here starts a trace, and tracing off costs a string comparison per row.

// tracerName names the spans of this package (the instrumentation scope).
const tracerName = "walletgl/internal/events"

// eventTracing is a relay's or a consumer's tracer and propagator.
type eventTracing struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

func newEventTracing(p *tracing.Provider) eventTracing {
	return eventTracing{tracer: p.Tracer(tracerName), propagator: p.Propagator()}
}

// headerCarrier lets the propagator read and write a NATS message's headers under their exact
// names (nats.Header is case-sensitive; http.Header would write "Traceparent").
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string { return nats.Header(c).Get(key) }

func (c headerCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// publishSpans are the publish spans of one relay round, by row; nil until a row is traced.
type publishSpans []trace.Span

// start begins the publish span of rows[i] when its row stores a trace context, as that
// context's child, and writes the span's context into msg's headers.
func (s *publishSpans) start(ctx context.Context, t eventTracing, rows []claimedRow, i int, msg *nats.Msg) {
	row := rows[i]
	if row.traceParent == "" {
		return
	}
	if *s == nil {
		*s = make(publishSpans, len(rows))
	}
	ctx, span := t.tracer.Start(tracing.WithTraceParent(ctx, row.traceParent), tracing.SpanPublish,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingDestinationName(msg.Subject),
			semconv.MessagingMessageID(row.id.String()),
			attribute.Int("walletgl.outbox.attempts", int(row.attempts)),
		))
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	t.propagator.Inject(ctx, headerCarrier(msg.Header))
	(*s)[i] = span
}

// end closes each span with its row's outcome: the stream sequence, or the error.
func (s publishSpans) end(outcomes []publishOutcome) {
	for i, span := range s {
		if span == nil {
			continue
		}
		out := outcomes[i]
		if out.err == nil && span.IsRecording() {
			span.SetAttributes(attribute.String("walletgl.stream_seq", strconv.FormatUint(out.seq, 10)),
				attribute.Bool("walletgl.broker_duplicate", out.dups > 0))
		}
		tracing.EndSpan(span, out.err)
	}
}

// startConsume begins the consume span of a verified message whose headers carry a trace
// context, as its child (the producer's publish span); d is returned as it is otherwise.
func (c *Consumer) startConsume(d delivery) delivery {
	h := d.msg.Headers()
	if h.Get(tracing.HeaderTraceParent) == "" {
		return d
	}
	ctx := c.tracing.propagator.Extract(context.Background(), headerCarrier(h))
	ctx, d.span = c.tracing.tracer.Start(ctx, tracing.SpanConsume,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingDestinationName(d.msg.Subject()),
			semconv.MessagingConsumerGroupName(c.cfg.Name),
			semconv.MessagingMessageID(d.EventID),
			attribute.String("walletgl.stream_seq", strconv.FormatUint(d.StreamSeq, 10)),
			attribute.Int64("walletgl.delivered", int64(d.delivered)),
		))
	d.traceID = tracing.TraceID(ctx)
	return d
}

// endConsume ends d's consume span, if it has one, with what became of it.
func endConsume(d delivery, outcome string, err error) {
	if d.span == nil {
		return
	}
	if d.span.IsRecording() {
		d.span.SetAttributes(attribute.String("walletgl.outcome", outcome))
	}
	tracing.EndSpan(d.span, err)
}

// applySpanNames names the span of the transaction that applies an event, by its type: the
// GL posts a transfer, the wallet applies an acknowledgment.
var applySpanNames = map[string]string{
	TypeTransferCompleted:   tracing.SpanPost,
	TypeTransferCompletedV2: tracing.SpanPost,
	TypeTransferPosted:      tracing.SpanAcknowledge,
	TypeTransferPostedV2:    tracing.SpanAcknowledge,
}

// startApply begins, for each traced delivery, the span of the transaction that applies it (a
// child of its consume span), and gives its envelope that span's traceparent, so that what the
// handler writes in the transaction (the GL's acknowledgment) continues the trace. It returns
// the spans by delivery; nil when none is traced.
func (c *Consumer) startApply(ds []delivery, events []Inbound) []trace.Span {
	var spans []trace.Span
	for i, d := range ds {
		if d.span == nil {
			continue
		}
		if spans == nil {
			spans = make([]trace.Span, len(ds))
		}
		ctx := trace.ContextWithSpan(context.Background(), d.span)
		ctx, spans[i] = c.tracing.tracer.Start(ctx, applySpanNames[c.cfg.EventType],
			trace.WithAttributes(attribute.Int("walletgl.batch_size", len(ds))))
		events[i].Env.TraceParent = tracing.TraceParent(ctx)
	}
	return spans
}

// endApply ends the spans of startApply with the transaction's outcome.
func endApply(spans []trace.Span, err error) {
	for _, span := range spans {
		if span != nil {
			tracing.EndSpan(span, err)
		}
	}
}

// outcomeOf names what became of a committed delivery: applied, or a duplicate of one applied before.
func outcomeOf(fresh bool) string {
	if fresh {
		return "processed"
	}
	return "duplicate"
}
