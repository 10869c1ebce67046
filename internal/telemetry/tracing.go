// Package telemetry sets up the OpenTelemetry tracing and structured logging shared by every group.
package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracingOptions configures the process-wide tracer provider.
type TracingOptions struct {
	// Endpoint is the OTLP/gRPC collector: a URL (http:// for plaintext, https:// for TLS) or a bare host:port
	// (plaintext). Empty falls back to the standard OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT variables; with neither,
	// tracing is a no-op.
	Endpoint string
	// ServiceName is reported as the service.name resource attribute.
	ServiceName string
	// Version is reported as service.version.
	Version string
}

// Enabled reports whether spans will be exported with these options and the current environment.
func (o TracingOptions) Enabled() bool {
	return o.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
		os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// SetupTracing installs W3C trace context and baggage propagation and, when an endpoint is configured, an OTLP/gRPC
// exporter behind a batch span processor. The returned function flushes and stops the exporter; call it on
// shutdown.
func SetupTracing(ctx context.Context, o TracingOptions) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if !o.Enabled() {
		otel.SetTracerProvider(noop.NewTracerProvider())
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracegrpc.Option
	switch {
	case strings.Contains(o.Endpoint, "://"):
		opts = append(opts, otlptracegrpc.WithEndpointURL(o.Endpoint))
	case o.Endpoint != "":
		opts = append(opts, otlptracegrpc.WithEndpoint(o.Endpoint), otlptracegrpc.WithInsecure())
	}
	exporter, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(o.ServiceName), semconv.ServiceVersion(o.Version)))
	if err != nil {
		return nil, fmt.Errorf("building the trace resource: %w", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(provider)
	return provider.Shutdown, nil
}

// Tracer returns the named tracer from the global provider, so spans follow whatever SetupTracing installed.
func Tracer(name string) trace.Tracer {
	return otel.Tracer("github.com/quartet-dev/quartet-operator/" + name)
}
