package tracing_test

import (
	"context"
	"testing"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"walletgl/internal/tracing"
)

func TestWithoutAnEndpointTracingIsOffAndItsTracersRecordNothing(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]tracing.Config{
		"no endpoint":  {},
		"SDK disabled": {Endpoint: "http://127.0.0.1:4318", SDKDisabled: true},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := tracing.New(context.Background(), "wallet", cfg, zerolog.Nop())
			require.NoError(t, err)
			require.False(t, p.Enabled())
			_, span := p.Tracer("test").Start(context.Background(), "x")
			require.False(t, span.IsRecording())
			require.NoError(t, p.Shutdown(context.Background()))
		})
	}
}

func TestAnEndpointTurnsTracingOnAndAnUnknownProtocolIsRefused(t *testing.T) {
	t.Parallel()
	for _, cfg := range []tracing.Config{
		{Endpoint: "http://127.0.0.1:4318"},
		{TracesEndpoint: "http://127.0.0.1:4318/v1/traces", Protocol: "http/protobuf"},
		{Endpoint: "http://127.0.0.1:4317", TracesProtocol: "grpc"},
	} {
		p, err := tracing.New(context.Background(), "gl", cfg, zerolog.Nop())
		require.NoError(t, err, "%+v", cfg)
		require.True(t, p.Enabled())
		require.NoError(t, p.Shutdown(context.Background())) // nothing buffered: no export tried
	}
	_, err := tracing.New(context.Background(), "gl", tracing.Config{Endpoint: "http://x", Protocol: "http/json"}, zerolog.Nop())
	require.ErrorContains(t, err, "OTEL_EXPORTER_OTLP_PROTOCOL")
}

func TestATraceParentRoundTripsThroughAContext(t *testing.T) {
	t.Parallel()
	p := tracing.NewWithExporter("wallet", tracetest.NewInMemoryExporter())
	ctx, span := p.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	tp := tracing.TraceParent(ctx)
	sc := span.SpanContext()
	require.Equal(t, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01", tp)
	require.Equal(t, sc.TraceID().String(), tracing.TraceIDOf(tp))
	require.Equal(t, sc.TraceID().String(), tracing.TraceID(tracing.WithTraceParent(context.Background(), tp)))

	require.Empty(t, tracing.TraceParent(context.Background()), "no span, no traceparent")
	require.Empty(t, tracing.TraceIDOf("not a traceparent"))
	require.Empty(t, tracing.TraceIDOf(""))
}
