package stage_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// exemplarsOf returns the trace IDs in the exemplars of one metric family's series whose labels include want.
func exemplarsOf(g Gomega, family string, want map[string]string) []string {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	var ids []string
	add := func(e *dto.Exemplar) {
		for _, l := range e.GetLabel() {
			if l.GetName() == stage.ExemplarTraceID {
				ids = append(ids, l.GetValue())
			}
		}
	}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			if c := m.GetCounter(); c != nil && c.GetExemplar() != nil {
				add(c.GetExemplar())
			}
			for _, b := range m.GetHistogram().GetBucket() {
				if b.GetExemplar() != nil {
					add(b.GetExemplar())
				}
			}
		}
	}
	return ids
}

// A stage span names the tenant and source target of the baggage, and the stage's metrics point at its trace.
func TestStageSpansCarryTheTenantAndMetricsTheTrace(t *testing.T) {
	g := NewWithT(t)
	exp := tracetest.NewInMemoryExporter()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	defer otel.SetTracerProvider(prev)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ord, err := runner.Start(ctx, runner.Orderer, runner.Options{GRPCAddr: "127.0.0.1:0"})
	g.Expect(err).NotTo(HaveOccurred())
	conn, err := grpc.NewClient(ord.GRPCAddr, grpc.WithTransportCredentials(insecureCreds()),
		grpc.WithStatsHandler(otelgrpcClient()))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = conn.Close() }()
	m, err := pipeline.Encode(configMap("a"))
	g.Expect(err).NotTo(HaveOccurred())
	pctx, err := pipeline.WithContext(ctx, pipeline.Context{Tenant: "team", Namespace: "team-ns", SourceTarget: "web",
		LeaseID: "0123456789abcdef"})
	g.Expect(err).NotTo(HaveOccurred())
	sum, err := stage.Forward(pctx, katastromav1.NewOrdererServiceClient(conn).Order, []*katastromav1.Manifest{m})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sum.GetObjects()).To(BeEquivalentTo(1))

	var span *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == runner.Orderer {
			span = &s
		}
	}
	g.Expect(span).NotTo(BeNil(), "the orderer span")
	g.Expect(span.Attributes).To(ContainElements(attribute.String(stage.AttrTenant, "team"),
		attribute.String(stage.AttrSourceTarget, "team-ns/web")))

	id := span.SpanContext.TraceID().String()
	method := map[string]string{"stage": runner.Orderer, "method": "/katastroma.v1.OrdererService/Order"}
	g.Expect(exemplarsOf(g, "katastroma_stage_rpc_duration_seconds", method)).To(ContainElement(id))
	g.Expect(exemplarsOf(g, "katastroma_stage_rpcs_total", method)).To(ContainElement(id))
	g.Expect(exemplarsOf(g, "katastroma_stage_objects_total",
		map[string]string{"stage": runner.Orderer, "action": "ordered"})).To(ContainElement(id))
}

// otelgrpcClient propagates trace context and baggage like a calling stage.
func otelgrpcClient() stats.Handler {
	return otelgrpc.NewClientHandler(otelgrpc.WithPropagators(stage.Propagator))
}
