package source

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.opentelemetry.io/otel"
	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// otlpCollector is an OTLP/gRPC trace receiver standing in for the collector: it records the exported span
// names with the service that exported them.
type otlpCollector struct {
	collectortracev1.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []string
}

func (c *otlpCollector) Export(_ context.Context, req *collectortracev1.ExportTraceServiceRequest) (
	*collectortracev1.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.spans = append(c.spans, service+"/"+s.GetName())
			}
		}
	}
	return &collectortracev1.ExportTraceServiceResponse{}, nil
}

func (c *otlpCollector) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans...)
}

// Crash detection sees an event only through its event.started span, so that span must reach the collector
// right away, well inside the 5 s batch interval the other spans wait for: a source handler dying in the first
// seconds of an event must still leave it behind.
func TestEventStartedIsExportedAtOnce(t *testing.T) {
	g := NewWithT(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	col := &otlpCollector{}
	srv := grpc.NewServer()
	collectortracev1.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	prev := otel.GetTracerProvider()
	shutdown, err := telemetry.SetupTracing(context.Background(), telemetry.TracingOptions{
		Endpoint: lis.Addr().String(), ServiceName: "katastroma-source"})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		_ = shutdown(context.Background())
		otel.SetTracerProvider(prev)
	}()

	_, event := startEvent(EventWebhook, "team")
	defer event.End()
	_, other := otel.Tracer("test").Start(context.Background(), "batched")
	other.End()
	g.Eventually(col.names).WithTimeout(2*time.Second).WithPolling(50*time.Millisecond).
		Should(ContainElement("katastroma-source/"+EventStartedSpanName), "event.started waits for the batch")
	g.Expect(col.names()).NotTo(ContainElement("katastroma-source/batched"), "other spans are still batched")
}
