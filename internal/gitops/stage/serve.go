package stage

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Span attributes every stage span carries, read from the pipeline baggage. They are the names the event and
// source_target spans use, so one query finds a tenant's or a source target's spans across every stage.
const (
	AttrTenant       = "tenant"
	AttrSourceTarget = "source_target.name" // <namespace>/<name>
)

// Start opens the span of a stage's work, with the tenant and source target of the pipeline baggage.
func Start(ctx context.Context, name string) (context.Context, trace.Span) {
	return otel.Tracer(TracerName).Start(ctx, name, trace.WithAttributes(Attributes(pipeline.FromContext(ctx))...))
}

// Attributes are the span attributes naming the tenant and source target of pc (none for an empty context).
func Attributes(pc pipeline.Context) []attribute.KeyValue {
	var out []attribute.KeyValue
	if pc.Tenant != "" {
		out = append(out, attribute.String(AttrTenant, pc.Tenant))
	}
	if pc.SourceTarget != "" {
		out = append(out, attribute.String(AttrSourceTarget, pc.Namespace+"/"+pc.SourceTarget))
	}
	return out
}

// isHealth: health checks are no stage work (no span, no deadline: a Watch lasts as long as its client wants).
func isHealth(method string) bool {
	return strings.HasPrefix(method, "/"+healthpb.Health_ServiceDesc.ServiceName+"/")
}

// bound gives an RPC that arrived without a deadline the server's own (RPCTimeout).
func (s *Server) bound(ctx context.Context, method string) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || isHealth(method) {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.conn.RPCTimeout)
}

// unary wraps every unary RPC of every stage (the source handler's Retrieve and Replay, health checks): deadline
// and metrics. The source handler's unary RPCs start events with their own root spans, so no stage span.
func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, cancel := s.bound(ctx, info.FullMethod)
	defer cancel()
	start := time.Now()
	resp, err := h(ctx, req)
	s.observe(ctx, info.FullMethod, start, err)
	return resp, err
}

// stream wraps every streaming RPC of every stage: deadline, the stage span (named after the stage, with the
// tenant and source target, ERROR on failure, superseded marked: End) and metrics. The handler finds the span in
// its stream's context.
func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	ctx, cancel := s.bound(ss.Context(), info.FullMethod)
	defer cancel()
	start := time.Now()
	if !isHealth(info.FullMethod) {
		var span trace.Span
		ctx, span = Start(ctx, s.Name)
		defer func() { End(span, err) }()
	}
	err = h(srv, &serverStream{ServerStream: ss, ctx: ctx})
	s.observe(ctx, info.FullMethod, start, err)
	return err
}

// serverStream is a server stream with the wrapper's context (deadline and stage span).
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

// observe counts an RPC and its duration, with the trace ID as exemplar so a slow or failed RPC on a dashboard
// leads to its trace.
func (s *Server) observe(ctx context.Context, method string, start time.Time, err error) {
	ex := exemplar(ctx)
	counter := rpcs.WithLabelValues(s.Name, method, status.Code(err).String())
	hist := rpcSeconds.WithLabelValues(s.Name, method)
	if ex == nil {
		counter.Inc()
		hist.Observe(time.Since(start).Seconds())
		return
	}
	counter.(prometheus.ExemplarAdder).AddWithExemplar(1, ex)
	hist.(prometheus.ExemplarObserver).ObserveWithExemplar(time.Since(start).Seconds(), ex)
}

// ExemplarTraceID is the exemplar label holding the trace ID.
const ExemplarTraceID = "trace_id"

// exemplar is the trace ID of ctx's span as exemplar labels (nil without a sampled span).
func exemplar(ctx context.Context) prometheus.Labels {
	sc := trace.SpanContextFromContext(ctx)
	// An unsampled trace was never exported: its ID would lead nowhere in the trace backend.
	if !sc.IsValid() || !sc.IsSampled() {
		return nil
	}
	return prometheus.Labels{ExemplarTraceID: sc.TraceID().String()}
}

// InitObjects starts the object counters of a stage's actions at zero, so rate() and increase() see the first
// objects of an action (a failed apply above all) and a dashboard shows 0 rather than nothing.
func InitObjects(stageName string, actions ...string) {
	for _, action := range actions {
		objects.WithLabelValues(stageName, action)
	}
}

// CountObject records n objects handled by a stage with an action (rendered, applied, unchanged, deleted,
// failed…), with the trace ID of ctx's span as exemplar.
func CountObject(ctx context.Context, stageName, action string, n int) {
	c := objects.WithLabelValues(stageName, action)
	if ex := exemplar(ctx); ex != nil {
		c.(prometheus.ExemplarAdder).AddWithExemplar(float64(n), ex)
		return
	}
	c.Add(float64(n))
}
