// Package eventtrace owns how a transfer's trace goes through the events, for the relay and
// the consumer alike: their tracer and propagator, and the carrier of a trace context in a
// NATS message's headers.
//
// A transfer's trace goes through the events: the outbox row stores the traceparent of the span
// that wrote it, the relay publishes the row under a publish span that continues it and puts
// that span's context into the message's headers (beside the signature, which covers the body
// alone), and the consumer continues it with a consume span per message and a span per event
// for the transaction that applies it. Rows and messages without a trace context are not
// traced: nothing here starts a trace, and tracing off costs a string comparison per row.
package eventtrace

import (
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"walletgl/internal/tracing"
)

// tracerName names the spans of the events (the instrumentation scope), the relay's and the
// consumer's alike.
const tracerName = "walletgl/internal/events"

// Tracing is a relay's or a consumer's tracer and propagator.
type Tracing struct {
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
}

// New returns the tracing of p (nil: spans that record nothing).
func New(p *tracing.Provider) Tracing {
	return Tracing{Tracer: p.Tracer(tracerName), Propagator: p.Propagator()}
}

// HeaderCarrier lets the propagator read and write a NATS message's headers under their exact
// names (nats.Header is case-sensitive; http.Header would write "Traceparent").
type HeaderCarrier nats.Header

func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
