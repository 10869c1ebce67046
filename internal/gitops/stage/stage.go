// Package stage runs a gitops pipeline stage as a gRPC server: health, OTel tracing with W3C trace context and
// baggage on every hop, Prometheus metrics and a graceful drain on shutdown. It also dials the next stage.
package stage

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Propagator carries W3C trace context and baggage on every hop, whatever the process-wide propagator is: the
// pipeline context is baggage, so the stages cannot work without it.
var Propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// TracerName is the instrumentation scope of every gitops span.
const TracerName = "github.com/quartet-dev/quartet-operator/internal/gitops"

var (
	rpcs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "katastroma_stage_rpcs_total", Help: "Stage RPCs handled, by stage, method and gRPC code.",
	}, []string{"stage", "method", "code"})
	rpcSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "katastroma_stage_rpc_duration_seconds", Help: "Stage RPC duration, by stage and method.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	}, []string{"stage", "method"})
	objects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "katastroma_stage_objects_total", Help: "Objects a stage produced or acted on, by stage and action.",
	}, []string{"stage", "action"})
)

func init() { ctrlmetrics.Registry.MustRegister(rpcs, rpcSeconds, objects) }

// Server is one stage's gRPC server.
type Server struct {
	Name   string
	GRPC   *grpc.Server
	Health *health.Server
	// DrainTimeout bounds the graceful stop; in-flight streams still running then are cut.
	DrainTimeout time.Duration
	conn         Connection
}

// New builds the gRPC server of a stage with DefaultConnection (NewWith).
func New(name string, register func(*grpc.Server)) *Server {
	return NewWith(name, Connection{}, register)
}

// NewWith builds the gRPC server of a stage: keepalives and connection ages from c, and the one wrapper every
// stage RPC runs in (serve.go); register adds the stage's services.
func NewWith(name string, c Connection, register func(*grpc.Server)) *Server {
	s := &Server{Name: name, Health: health.NewServer(), DrainTimeout: 30 * time.Second, conn: c.WithDefaults()}
	opts := append(serverOptions(s.conn),
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithPropagators(Propagator))))
	if a := s.conn.Auth; a != nil { // first: nothing runs for a caller that is not a stage of this Platform
		opts = append(opts, grpc.ChainUnaryInterceptor(a.unary), grpc.ChainStreamInterceptor(a.stream))
	}
	opts = append(opts, grpc.ChainUnaryInterceptor(s.unary), grpc.ChainStreamInterceptor(s.stream))
	s.GRPC = grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(s.GRPC, s.Health)
	register(s.GRPC)
	for svc := range s.GRPC.GetServiceInfo() {
		s.Health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	return s
}

// Serve serves on lis until ctx ends, then reports NOT_SERVING, lets in-flight RPCs finish for up to
// DrainTimeout and stops.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- s.GRPC.Serve(lis) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.Health.Shutdown()
	done := make(chan struct{})
	go func() { s.GRPC.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.DrainTimeout):
		s.GRPC.Stop()
	}
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// End ends a span, marking it ERROR when err is set (a collector routing failed spans keys on the status). A
// superseded error is no failure: the span carries AttrSuperseded instead, so pharos does not replay the event.
func End(span trace.Span, err error) {
	if IsSuperseded(err) {
		span.SetAttributes(supersededAttr())
		span.AddEvent("superseded", trace.WithAttributes(attribute.String("message", err.Error())))
		span.End()
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
