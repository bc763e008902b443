package inbox

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/events/contract"
	"walletgl/internal/events/internal/eventtrace"
	"walletgl/internal/tracing"
)

// startConsume begins the consume span of a verified message whose headers carry a trace
// context, as its child (the producer's publish span); d is returned as it is otherwise.
func (c *Consumer) startConsume(d delivery) delivery {
	h := d.msg.Headers()
	if h.Get(tracing.HeaderTraceParent) == "" {
		return d
	}
	ctx := c.tracing.Propagator.Extract(context.Background(), eventtrace.HeaderCarrier(h))
	ctx, d.span = c.tracing.Tracer.Start(ctx, tracing.SpanConsume,
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
// GL posts every movement of the wallet (a transfer, a reversal, a hold's, a batch's), the
// wallet applies an acknowledgment. Every type some service produces has a name.
var applySpanNames = map[string]string{
	contract.TypeTransferCompleted:      tracing.SpanPost,
	contract.TypeTransferCompletedV2:    tracing.SpanPost,
	contract.TypeTransferReversed:       tracing.SpanPost,
	contract.TypeHoldPlaced:             tracing.SpanPost,
	contract.TypeHoldCaptured:           tracing.SpanPost,
	contract.TypeHoldVoided:             tracing.SpanPost,
	contract.TypeTransferBatchCompleted: tracing.SpanPost,
	contract.TypeTransferBatchReversed:  tracing.SpanPost,
	contract.TypeTransferPosted:         tracing.SpanAcknowledge,
	contract.TypeTransferPostedV2:       tracing.SpanAcknowledge,
}

// applySpanName is the name of the span applying an event of eventType, read by a consumer of
// consumerType; a type without a name of its own (an envelope too broken to tell) takes the
// consumer's.
func applySpanName(eventType, consumerType string) string {
	if name, ok := applySpanNames[eventType]; ok {
		return name
	}
	return applySpanNames[consumerType]
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
		ctx, spans[i] = c.tracing.Tracer.Start(ctx, applySpanName(events[i].Env.Type, c.cfg.EventType),
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

// outcomeOf names what became of a committed delivery: applied, or a duplicate of one applied
// before.
func outcomeOf(fresh bool) string {
	if fresh {
		return "processed"
	}
	return "duplicate"
}
