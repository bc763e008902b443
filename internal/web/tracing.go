package web

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/tracing"
)

// serverSpans starts the server span of each request when tracing is on.
type serverSpans struct {
	tracer     trace.Tracer // nil: tracing off, no span and no header read
	propagator propagation.TextMapPropagator
}

func newServerSpans(tr *tracing.Provider) serverSpans {
	if !tr.Enabled() {
		return serverSpans{}
	}
	return serverSpans{tracer: tr.Tracer("walletgl/internal/web"), propagator: tr.Propagator()}
}

// start begins r's server span, named "METHOD /path/{pattern}" after the route that matched (the
// method alone when none did), as the child of the traceparent r carries or in a new trace.
func (s serverSpans) start(r *http.Request, route string) (context.Context, trace.Span) {
	if s.tracer == nil {
		return r.Context(), nil
	}
	ctx := s.propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	name, path := r.Method, routePath(route)
	attrs := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path))}
	if path != "" {
		name += " " + path
		attrs = append(attrs, trace.WithAttributes(semconv.HTTPRoute(path)))
	}
	return s.tracer.Start(ctx, name, attrs...)
}

// routePath is the path template of a mux pattern ("POST /v1/transfers" → "/v1/transfers").
func routePath(route string) string {
	if _, path, ok := strings.Cut(route, " "); ok {
		return path
	}
	return route
}

// endServerSpan ends a request's span with its status; a 5xx is the server's error.
func endServerSpan(span trace.Span, status int) {
	if span == nil {
		return
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}
