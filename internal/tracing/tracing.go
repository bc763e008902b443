// Package tracing owns the services' OpenTelemetry traces: the TracerProvider built from the
// standard OTEL_* environment (a no-op one when no OTLP endpoint is set), the W3C Trace Context
// propagation of a transfer's trace through the HTTP request, the outbox row and the NATS
// message headers, the span names, and the trace id on log lines.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The spans of a transfer's trace besides the HTTP server span (named by its route pattern,
// "POST /v1/transfers"). These names are a contract with whoever reads the traces
// (docs/operations.md#traces).
const (
	SpanCommit      = "commit"      // the wallet: a transfer request's group-commit transaction
	SpanPublish     = "publish"     // a relay: one outbox row published to JetStream
	SpanConsume     = "consume"     // a consumer: one message, from fetch to commit or failure
	SpanPost        = "post"        // the GL: the posting transaction of one event
	SpanAcknowledge = "acknowledge" // the wallet: the transaction applying the GL's acknowledgment
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolHTTP = "http/protobuf" // the default, as the OpenTelemetry specification says
	ProtocolGRPC = "grpc"
)

// Config is what the standard OpenTelemetry variables say about exporting traces. The
// exporter reads the rest of them (headers, timeout, certificates, compression) itself.
type Config struct {
	ServiceName    string // OTEL_SERVICE_NAME; empty: the service's own name (wallet, gl)
	Endpoint       string // OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL
	TracesEndpoint string // OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: the traces URL, used as it is
	Protocol       string // OTEL_EXPORTER_OTLP_PROTOCOL
	TracesProtocol string // OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, which wins over Protocol
	SDKDisabled    bool   // OTEL_SDK_DISABLED: no traces whatever the endpoint
}

// Enabled reports whether traces are exported: an endpoint is set and the SDK is not disabled.
func (c Config) Enabled() bool {
	return !c.SDKDisabled && (c.Endpoint != "" || c.TracesEndpoint != "")
}

func (c Config) protocol() string {
	switch {
	case c.TracesProtocol != "":
		return c.TracesProtocol
	case c.Protocol != "":
		return c.Protocol
	}
	return ProtocolHTTP
}

// Validate reports a protocol this build cannot export with.
func (c Config) Validate() error {
	switch p := c.protocol(); p {
	case ProtocolHTTP, ProtocolGRPC:
		return nil
	default:
		return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not %s or %s", p, ProtocolHTTP, ProtocolGRPC)
	}
}

// endpointURL is the URL the exporter sends to: the traces endpoint as it is, or the base
// endpoint with the signal's path (HTTP) or as it is (gRPC), as the specification says.
func (c Config) endpointURL() string {
	if c.TracesEndpoint != "" {
		return c.TracesEndpoint
	}
	if c.protocol() == ProtocolHTTP {
		return strings.TrimSuffix(c.Endpoint, "/") + "/v1/traces"
	}
	return c.Endpoint
}

// Provider is a service's TracerProvider and its propagator. The nil Provider, and the one
// built without an endpoint, trace nothing: their tracers are no-ops and the services then skip
// every span and header (tracing off costs nothing measurable).
type Provider struct {
	sdk        *sdktrace.TracerProvider
	propagator propagation.TextMapPropagator
}

// New builds the TracerProvider of service from cfg: an OTLP exporter behind a batching span
// processor when cfg is enabled, sampled as OTEL_TRACES_SAMPLER says (the SDK reads it;
// default parentbased_always_on); otherwise a Provider that traces nothing. Shutdown flushes it.
func New(ctx context.Context, service string, cfg Config, log zerolog.Logger) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return &Provider{}, nil
	}
	exporter, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	name := cfg.ServiceName
	if name == "" {
		name = service
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(name)))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	// The SDK reports export failures through otel's one global error handler: to the log, once
	// per failure, instead of the standard library's logger.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn().Err(err).Str("component", "tracing").Msg("trace export")
	}))
	log.Info().Str("endpoint", cfg.endpointURL()).Str("protocol", cfg.protocol()).Str("service_name", name).Msg("traces exported")
	return &Provider{
		sdk:        sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res)),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}, nil
}

func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch cfg.protocol() {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.endpointURL()))
	default:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.endpointURL()))
	}
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter %s: %w", cfg.endpointURL(), err)
	}
	return exp, nil
}

// NewWithExporter builds a Provider that sends every span to exp synchronously, for tests
// (tracetest.NewInMemoryExporter).
func NewWithExporter(service string, exp sdktrace.SpanExporter) *Provider {
	res := resource.NewSchemaless(semconv.ServiceName(service))
	return &Provider{
		sdk:        sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res)),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
}

// Enabled reports whether p records and exports spans.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// TracerProvider is p's TracerProvider, a no-op one when p is off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if !p.Enabled() {
		return noop.NewTracerProvider()
	}
	return p.sdk
}

// Tracer is the tracer of the instrumented package name, a no-op one when p is off.
func (p *Provider) Tracer(name string) trace.Tracer { return p.TracerProvider().Tracer(name) }

// Propagator is W3C Trace Context and Baggage, the one format on HTTP and NATS headers.
func (p *Provider) Propagator() propagation.TextMapPropagator {
	if !p.Enabled() {
		return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return p.propagator
}

// Shutdown exports the spans still buffered and stops the exporter; ctx bounds the wait.
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("shut down tracing: %w", err)
	}
	return nil
}
