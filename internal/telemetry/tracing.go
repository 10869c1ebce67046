// Package telemetry sets up the OpenTelemetry tracing and structured logging shared by every group.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

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
		immediate.Store(nil)
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
	// Same exporter and resource, but every span is handed to the exporter as soon as it ends (a batch of one,
	// still asynchronous, so a slow collector never blocks the caller).
	now := sdktrace.NewTracerProvider(sdktrace.WithBatcher(sharedExporter{exporter}, sdktrace.WithMaxExportBatchSize(1)),
		sdktrace.WithResource(res))
	immediate.Store(now)
	return func(ctx context.Context) error {
		immediate.CompareAndSwap(now, nil)
		// The batch provider's Shutdown closes the exporter both share: shut the immediate one down first (its
		// processor leaves the exporter open, see sharedExporter), so its queued spans (event.started) are exported
		// while the exporter still works and none is left behind.
		return errors.Join(now.Shutdown(ctx), provider.Shutdown(ctx))
	}, nil
}

// sharedExporter is the immediate provider's view of the exporter it shares with the batch provider: shutting
// the immediate provider down exports what it holds but leaves the exporter open for the batch provider.
type sharedExporter struct{ sdktrace.SpanExporter }

// Shutdown leaves the shared exporter open; the batch provider's Shutdown closes it.
func (sharedExporter) Shutdown(context.Context) error { return nil }

// immediate is the provider of ImmediateTracer, set by SetupTracing while it exports.
var immediate atomic.Pointer[sdktrace.TracerProvider]

// ImmediateTracer returns a tracer whose spans are exported as soon as they end instead of with the next batch
// (up to 5 s later), for the few spans that must reach the collector even when the process dies right after
// (the gitops event.started span that crash detection keys on). Without SetupTracing's exporter it is the global
// provider's tracer, so tests that install their own provider see these spans too.
func ImmediateTracer(name string) trace.Tracer {
	if p := immediate.Load(); p != nil {
		return p.Tracer(name)
	}
	return otel.Tracer(name)
}

// Tracer returns the named tracer from the global provider, so spans follow whatever SetupTracing installed.
func Tracer(name string) trace.Tracer {
	return otel.Tracer("github.com/quartet-dev/quartet-operator/" + name)
}
