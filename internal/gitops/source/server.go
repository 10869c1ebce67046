package source

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// Server is the SourceHandlerService.
type Server struct {
	katastromav1.UnimplementedSourceHandlerServiceServer
	Handler *Handler
}

// contextWith returns a context that carries the span of spanCtx but the lifetime of life.
func contextWith(life, spanCtx context.Context) context.Context {
	return trace.ContextWithSpan(life, trace.SpanFromContext(spanCtx))
}

// Retrieve starts a manual event for one source target at the current commit of its ref.
func (s *Server) Retrieve(ctx context.Context, req *katastromav1.RetrieveRequest) (*katastromav1.RetrieveResponse, error) {
	h := s.Handler
	cm := &corev1.ConfigMap{}
	err := h.Client.Get(ctx, types.NamespacedName{Namespace: req.GetNamespace(), Name: req.GetSourceTarget()}, cm)
	if apierrors.IsNotFound(err) || (err == nil && cm.Labels[pipeline.LabelType] != pipeline.TypeSourceTarget) {
		return nil, status.Errorf(codes.NotFound, "source target %s/%s not found", req.GetNamespace(), req.GetSourceTarget())
	}
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	t, err := TargetFromConfigMap(cm)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err := servedHere(cm, h.Lease.Platform); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	auth, err := h.auth(ctx, t)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	sha, err := h.resolveRef(ctx, t, auth)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	ectx, span := startEvent(EventManual, h.Tenant(ctx, t.Namespace))
	j, err := h.newJob(contextWith(h.baseCtx(), ectx), ctx, t, sha)
	if err != nil {
		stage.End(span, err)
		if _, ok := errors.AsType[*NotServed](err); ok {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return nil, status.Error(codes.Aborted, err.Error())
	}
	h.inflight.Add(1)
	go func() {
		defer h.inflight.Done()
		h.runEvent(span, []*job{j}, nil)
	}()
	return &katastromav1.RetrieveResponse{EventId: span.SpanContext().TraceID().String()}, nil
}

// Replay re-runs an event for every source target it processed, at that event's commit. It is refused while a
// lease is active, once the event's replays are used up, and when a newer event superseded it.
func (s *Server) Replay(ctx context.Context, req *katastromav1.ReplayRequest) (*katastromav1.ReplayResponse, error) {
	h := s.Handler
	id := req.GetEventId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "event_id is required")
	}
	var l corev1.ConfigMapList
	if err := h.Client.List(ctx, &l, client.MatchingLabels{pipeline.LabelType: pipeline.TypeSourceTarget}); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	var cms []*corev1.ConfigMap
	var superseded []string
	for i := range l.Items {
		cm := &l.Items[i]
		switch id {
		case cm.Annotations[pipeline.AnnotationEventID]:
			cms = append(cms, cm)
		case cm.Annotations[pipeline.AnnotationPrevEvent]:
			superseded = append(superseded, fmt.Sprintf("%s/%s (now event %s)", cm.Namespace, cm.Name,
				cm.Annotations[pipeline.AnnotationEventID]))
		}
	}
	if len(cms) == 0 {
		if len(superseded) > 0 {
			// Final: pharos stops replaying a superseded event instead of counting refusals.
			return nil, stage.Superseded(fmt.Sprintf("event %s was superseded by a newer event on %v", id,
				superseded))
		}
		return nil, status.Errorf(codes.NotFound, "no source target records event %s", id)
	}
	// katastroma.replay_of (pharos.AttrReplayOf) lets pharos attribute this new trace to the event it re-runs.
	ectx, span := startEvent(EventReplay, h.Tenant(ctx, cms[0].Namespace), attribute.String("katastroma.replay_of", id))
	ectx = contextWith(h.baseCtx(), ectx)
	var jobs []*job
	var refused []error
	resp := &katastromav1.ReplayResponse{EventId: span.SpanContext().TraceID().String()}
	for _, cm := range cms {
		t, err := TargetFromConfigMap(cm)
		if err != nil {
			refused = append(refused, err)
			continue
		}
		jctx, jspan, leaseID := startTarget(ectx, t)
		if err := h.Lease.AcquireReplay(ctx, h.Client, cm, leaseID); err != nil {
			stage.End(jspan, err)
			refused = append(refused, err)
			continue
		}
		commit := cm.Annotations[pipeline.AnnotationEventCommit]
		jobs = append(jobs, &job{target: t, commit: commit, ctx: jctx, span: jspan, leaseID: leaseID})
		resp.SourceTargets = append(resp.SourceTargets, t.Namespace+"/"+t.Name)
	}
	if len(jobs) == 0 {
		err := errors.Join(refused...)
		stage.End(span, err)
		var r *Refusal
		var ns *NotServed
		if errors.As(err, &r) || errors.As(err, &ns) {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	h.inflight.Add(1)
	go func() {
		defer h.inflight.Done()
		h.runEvent(span, jobs, errors.Join(refused...))
	}()
	return resp, nil
}
