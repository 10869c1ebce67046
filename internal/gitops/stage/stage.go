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
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
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

// CountObject records n objects handled by a stage with an action (rendered, applied, unchanged, deleted, failed…).
func CountObject(stageName, action string, n int) {
	objects.WithLabelValues(stageName, action).Add(float64(n))
}

// Server is one stage's gRPC server.
type Server struct {
	Name   string
	GRPC   *grpc.Server
	Health *health.Server
	// DrainTimeout bounds the graceful stop; in-flight streams still running then are cut.
	DrainTimeout time.Duration
}

// New builds the gRPC server of a stage; register adds the stage's services.
func New(name string, register func(*grpc.Server)) *Server {
	s := &Server{Name: name, Health: health.NewServer(), DrainTimeout: 30 * time.Second}
	s.GRPC = grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithPropagators(Propagator))),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo,
			h grpc.UnaryHandler) (any, error) {
			start := time.Now()
			resp, err := h(ctx, req)
			s.observe(info.FullMethod, start, err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo,
			h grpc.StreamHandler) error {
			start := time.Now()
			err := h(srv, ss)
			s.observe(info.FullMethod, start, err)
			return err
		}),
	)
	healthpb.RegisterHealthServer(s.GRPC, s.Health)
	register(s.GRPC)
	for svc := range s.GRPC.GetServiceInfo() {
		s.Health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	return s
}

func (s *Server) observe(method string, start time.Time, err error) {
	rpcs.WithLabelValues(s.Name, method, status.Code(err).String()).Inc()
	rpcSeconds.WithLabelValues(s.Name, method).Observe(time.Since(start).Seconds())
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

// Dial connects to another stage with tracing and baggage propagation.
func Dial(target string) (*grpc.ClientConn, error) {
	return grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithPropagators(Propagator))))
}

// Start opens the span of a stage's work.
func Start(ctx context.Context, name string) (context.Context, trace.Span) {
	return otel.Tracer(TracerName).Start(ctx, name)
}

// End ends a span, marking it ERROR when err is set (a collector routing failed spans keys on the status).
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
