package outbox

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/events/internal/eventtrace"
	"walletgl/internal/tracing"
)

// publishSpans are the publish spans of one relay round, by row; nil until a row is traced.
type publishSpans []trace.Span

// start begins the publish span of rows[i] when its row stores a trace context, as that
// context's child, and writes the span's context into msg's headers.
func (s *publishSpans) start(ctx context.Context, t eventtrace.Tracing, rows []claimedRow, i int, msg *nats.Msg) {
	row := rows[i]
	if row.traceParent == "" {
		return
	}
	if *s == nil {
		*s = make(publishSpans, len(rows))
	}
	ctx, span := t.Tracer.Start(tracing.WithTraceParent(ctx, row.traceParent), tracing.SpanPublish,
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
	t.Propagator.Inject(ctx, eventtrace.HeaderCarrier(msg.Header))
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
