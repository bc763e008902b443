package tracing

import (
	"strconv"

	"walletgl/internal/config"
)

// Bind declares the standard OpenTelemetry variables that decide whether and where traces go
// (docs/operations.md#traces). The exporter reads the rest of OTEL_EXPORTER_OTLP_* itself
// (headers, timeout, certificates, compression), and the SDK reads OTEL_TRACES_SAMPLER.
func (c *Config) Bind(s *config.Set) {
	s.Env(&c.Endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT", "OTLP collector base URL (http://host:4318); set, traces are exported; empty, they are off")
	s.Env(&c.TracesEndpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTLP traces URL used as it is (http://host:4318/v1/traces); wins over OTEL_EXPORTER_OTLP_ENDPOINT")
	s.Env(&c.Protocol, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf (default) or grpc")
	s.Env(&c.TracesProtocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "as OTEL_EXPORTER_OTLP_PROTOCOL, for traces; wins over it")
	s.Env(&c.ServiceName, "OTEL_SERVICE_NAME", "service.name of the spans (empty: wallet or gl)")
	var disabled string
	s.Env(&disabled, "OTEL_SDK_DISABLED", "true: no traces whatever the endpoint")
	c.SDKDisabled, _ = strconv.ParseBool(disabled)
}
