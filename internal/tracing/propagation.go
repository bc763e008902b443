package tracing

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceParent is the W3C Trace Context header: on an HTTP request, in a NATS message's
// headers, and the value an outbox row stores (its trace_context column).
const HeaderTraceParent = "traceparent"

// traceContext writes and reads the traceparent alone; the OpenTelemetry propagator does the
// formatting.
var traceContext propagation.TraceContext

// TraceParent is the traceparent of the span in ctx ("00-<trace id>-<span id>-<flags>"), or ""
// when ctx carries none.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c oneHeader
	traceContext.Inject(ctx, &c)
	return c.value
}

// WithTraceParent returns ctx with the remote span context tp names as the parent of the spans
// started from it; ctx as it is when tp is empty or not a valid traceparent.
func WithTraceParent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return traceContext.Extract(ctx, &oneHeader{value: tp})
}

// oneHeader carries the traceparent alone, without a map.
type oneHeader struct{ value string }

func (c *oneHeader) Get(key string) string {
	if key == HeaderTraceParent {
		return c.value
	}
	return ""
}

func (c *oneHeader) Set(key, value string) {
	if key == HeaderTraceParent {
		c.value = value
	}
}

func (c *oneHeader) Keys() []string { return []string{HeaderTraceParent} }

// TraceID is the trace id of the span in ctx, "" when there is none.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// TraceIDOf is the trace id a traceparent names, "" when it names none.
func TraceIDOf(tp string) string {
	if tp == "" {
		return ""
	}
	return TraceID(WithTraceParent(context.Background(), tp))
}

// Logger is log with the trace_id of the span in ctx, or log itself when ctx carries none.
func Logger(ctx context.Context, log zerolog.Logger) zerolog.Logger {
	id := TraceID(ctx)
	if id == "" {
		return log
	}
	return log.With().Str("trace_id", id).Logger()
}

// EndSpan ends span, recording err as its error status first.
func EndSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// LogTraceID adds the trace_id field to ev when traceID is not empty.
func LogTraceID(ev *zerolog.Event, traceID string) *zerolog.Event {
	if traceID == "" {
		return ev
	}
	return ev.Str("trace_id", traceID)
}
