package telemetry

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// withRecordingProvider installs an in-memory span recorder as the global tracer provider for one test.
func withRecordingProvider(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exporter := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(provider)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })
	return exporter
}

func TestTracedReconcilerLogsWithSpanIDs(t *testing.T) {
	g := NewWithT(t)
	exporter := withRecordingProvider(t)
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	ctx := log.IntoContext(context.Background(), logger)

	failure := errors.New("boom")
	r := TracedReconciler("gnmic-target", reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		log.FromContext(ctx).Info("inside")
		return reconcile.Result{}, failure
	}))
	_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "router1"}})
	g.Expect(err).To(MatchError(failure))

	spans := exporter.GetSpans()
	g.Expect(spans).To(HaveLen(1))
	span := spans[0]
	g.Expect(span.Name).To(Equal("reconcile"))
	g.Expect(span.Status.Code).To(Equal(codes.Error))
	g.Expect(span.Attributes).To(ContainElement(HaveField("Value.AsString()", "gnmic-target")))
	g.Expect(lines).To(HaveLen(1))
	g.Expect(lines[0]).To(ContainSubstring(`"trace_id"="` + span.SpanContext.TraceID().String() + `"`))
	g.Expect(lines[0]).To(ContainSubstring(`"span_id"="` + span.SpanContext.SpanID().String() + `"`))
}

func TestLoggerWithoutSpanHasNoIDs(t *testing.T) {
	g := NewWithT(t)
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	ctx := WithSpanLogger(log.IntoContext(context.Background(), logger))
	log.FromContext(ctx).Info("no span")
	g.Expect(lines).To(HaveLen(1))
	g.Expect(lines[0]).NotTo(ContainSubstring("trace_id"))
}

func TestSetupTracingIsANoOpWithoutEndpoint(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, err := SetupTracing(context.Background(), TracingOptions{ServiceName: "test"})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(shutdown(context.Background())).To(Succeed()) }()
	_, span := Tracer("test").Start(context.Background(), "x")
	g.Expect(span.SpanContext().IsValid()).To(BeFalse(), "no-op spans carry no IDs")
	span.End()
	// W3C trace context and baggage are propagated either way.
	g.Expect(otel.GetTextMapPropagator().Fields()).To(ContainElements("traceparent", "baggage"))
}

func TestSetupTracingWithEndpointExportsRealSpans(t *testing.T) {
	g := NewWithT(t)
	previous := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(previous) })
	for _, endpoint := range []string{"127.0.0.1:4317", "http://127.0.0.1:4317"} {
		shutdown, err := SetupTracing(context.Background(), TracingOptions{Endpoint: endpoint, ServiceName: "test"})
		g.Expect(err).NotTo(HaveOccurred())
		_, span := Tracer("test").Start(context.Background(), "x")
		g.Expect(span.SpanContext().IsValid()).To(BeTrue())
		g.Expect(trace.SpanFromContext(context.Background()).SpanContext().IsValid()).To(BeFalse())
		span.End()
		// Nothing listens on the endpoint: shutdown must still return (with the export error at most).
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		_ = shutdown(ctx)
		cancel()
	}
}

func TestNewLoggerLevels(t *testing.T) {
	for _, level := range []string{"debug", "info", "error", "", "3"} {
		_, err := NewLogger(level, false)
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), level)
	}
	_, err := NewLogger("loud", false)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("--log-level")))
	_, err = NewLogger("-1", false)
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("verbosity")))
}

// Shutdown stops the immediate provider too (before the batch provider closes the exporter they share), so no
// span is left queued for a closed exporter and its export goroutine ends; ImmediateTracer falls back to the
// global provider afterwards.
func TestShutdownStopsTheImmediateProvider(t *testing.T) {
	g := NewWithT(t)
	previous := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(previous) })
	shutdown, err := SetupTracing(context.Background(), TracingOptions{Endpoint: "127.0.0.1:4317", ServiceName: "test"})
	g.Expect(err).NotTo(HaveOccurred())
	now := immediate.Load()
	g.Expect(now).NotTo(BeNil())
	_, span := ImmediateTracer("test").Start(context.Background(), "event.started")
	g.Expect(span.IsRecording()).To(BeTrue())
	span.End()
	// Nothing listens on the endpoint: shutdown must still return (with the export error at most).
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	_ = shutdown(ctx)
	g.Expect(immediate.Load()).To(BeNil())
	_, late := now.Tracer("test").Start(context.Background(), "late")
	g.Expect(late.IsRecording()).To(BeFalse(), "the immediate provider was shut down")
}
