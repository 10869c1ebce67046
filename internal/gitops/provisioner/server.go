package provisioner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// StageName names the provisioner in spans and metrics.
const StageName = "provisioner"

// ServiceAccount is the tenant ServiceAccount the provisioner impersonates.
const ServiceAccount = "provisioner"

// Server is the ProvisionerService. It keeps no state between calls. Next, when set, receives the applied set
// from Provision for pruning.
type Server struct {
	katastromav1.UnimplementedProvisionerServiceServer
	Clients *Clients
	Next    katastromav1.PrunerServiceClient
	// VerifyTimeout bounds the verify after a complete apply (0: DefaultVerifyTimeout; negative turns the verify
	// off, and success then means applied).
	VerifyTimeout time.Duration
	// VerifyInterval is the pause between verify rounds (0: 2s).
	VerifyInterval time.Duration
	// BeforeBatch, when set, runs before the lease check that precedes each write batch (a test seam to hold an
	// event inside its apply while a newer one takes the lease).
	BeforeBatch func(pc pipeline.Context, gk schema.GroupKind)
}

// TargetVerifyTimeout parses a source target's data.verify-timeout: nil when unset (the stage's
// --verify-timeout applies), 0 turns the verify off, otherwise a positive Go duration.
func TargetVerifyTimeout(v string) (*time.Duration, error) {
	if v == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return nil, fmt.Errorf("data.verify-timeout: Invalid value: %q: a non-negative Go duration (0 turns the verify off)", v)
	}
	return &d, nil
}

// LeaseError maps a lease or context problem to a gRPC status: a lost lease is superseded (final, never
// replayed), anything else is unavailable (transient).
func LeaseError(err error) error {
	var lost *inventory.ErrLeaseLost
	if errors.As(err, &lost) {
		return stage.Superseded(err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}

func (s *Server) begin(ctx context.Context) (*applier, error) {
	pc := pipeline.FromContext(ctx)
	if err := pc.Validate(); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	target, err := inventory.LeasedTarget(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID)
	if err != nil {
		return nil, LeaseError(err)
	}
	as, err := s.Clients.As(pc.Namespace, ServiceAccount)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	a := &applier{clients: s.Clients, as: as, pc: pc, target: target}
	if a.verifyTimeout, err = TargetVerifyTimeout(pipeline.IncomingValue(ctx, pipeline.MDVerifyTimeout)); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	initTenantMetrics(pc.Tenant)
	a.fence = func(ctx context.Context, gk schema.GroupKind) error {
		if s.BeforeBatch != nil {
			s.BeforeBatch(pc, gk)
		}
		if err := inventory.CheckLease(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID); err != nil {
			return LeaseError(err)
		}
		return nil
	}
	return a, nil
}

// record records the applied set as the inventory, moving whatever the previous inventory had and this set
// lacks to the prune list, fenced by the lease (inventory.Record).
func (s *Server) record(ctx context.Context, a *applier) error {
	pc := a.pc
	err := inventory.Record(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID,
		func(old *inventory.Inventory, _ bool) (*inventory.Inventory, bool) {
			return &inventory.Inventory{Commit: pc.Commit, Objects: a.applied,
				Prune: inventory.Minus(append(old.Objects, old.Prune...), a.applied)}, false
		}, driftMarks(a))
	var lost *inventory.ErrLeaseLost
	if errors.As(err, &lost) {
		return LeaseError(err)
	}
	if err != nil {
		return status.Errorf(codes.Aborted, "recording the inventory: %v", err)
	}
	return nil
}

// driftMarks reports repaired drift on the source target (nil when there was none).
func driftMarks(a *applier) map[string]string {
	var repaired []string
	for _, r := range a.results {
		if r.GetAction() == ActionRepaired {
			o := r.GetObject()
			repaired = append(repaired, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
	}
	if len(repaired) == 0 {
		return nil
	}
	sort.Strings(repaired)
	return map[string]string{pipeline.AnnotationDriftRepaired: fmt.Sprintf("%s at commit %s: %d objects, first %s",
		time.Now().UTC().Format(time.RFC3339), a.pc.Commit, len(repaired), repaired[0])}
}

// verify runs the health verify of what a applied (verify.go), unless it is turned off. Its span events go on
// the stage span the shared wrapper opened.
func (s *Server) verify(ctx context.Context, a *applier) error {
	timeout, interval := s.VerifyTimeout, s.VerifyInterval
	if a.verifyTimeout != nil {
		// The target's own timeout; the call's deadline still bounds it (verifyUntil stops before it).
		if timeout = *a.verifyTimeout; timeout == 0 {
			return nil
		}
	}
	if timeout < 0 {
		return nil
	}
	if timeout == 0 {
		timeout = DefaultVerifyTimeout
	}
	if interval <= 0 {
		interval = 2 * time.Second
	}
	return a.verify(ctx, trace.SpanFromContext(ctx), timeout, interval)
}

func (s *Server) finish(ctx context.Context, a *applier) error {
	span := trace.SpanFromContext(ctx)
	counts := map[string]int{}
	for _, r := range a.results {
		counts[r.GetAction()]++
		if r.GetAction() == ActionRepaired {
			o := r.GetObject()
			span.AddEvent("drift.repaired", trace.WithAttributes(attribute.String("object.kind", o.GetKind()),
				attribute.String("object.namespace", o.GetNamespace()), attribute.String("object.name", o.GetName())))
		}
	}
	for action, n := range counts {
		stage.CountObject(ctx, StageName, action, n)
	}
	if n := counts[ActionRepaired]; n > 0 {
		driftRepaired.WithLabelValues(a.pc.Tenant).Add(float64(n))
	}
	span.SetAttributes(attribute.Int("provisioner.applied", counts[ActionApplied]),
		attribute.Int("provisioner.repaired", counts[ActionRepaired]),
		attribute.Int("provisioner.unchanged", counts[ActionUnchanged]),
		attribute.Int("provisioner.failed", counts[ActionFailed]))
	if a.failures > 0 {
		for _, r := range a.results {
			if r.GetError() != "" {
				return status.Errorf(codes.Aborted, "%d of %d objects failed to apply; first: %s %s/%s: %s",
					a.failures, len(a.results), r.GetObject().GetKind(), r.GetObject().GetNamespace(),
					r.GetObject().GetName(), r.GetError())
			}
		}
	}
	return nil
}

// ProvisionStream receives every manifest, applies them like Provision (a dry run of the whole set first, so a
// commit applies whole or not at all) and streams a result per object back. When every object applied, it
// records the inventory and verifies the objects' health; it never prunes.
func (s *Server) ProvisionStream(stream grpc.BidiStreamingServer[katastromav1.Manifest, katastromav1.ObjectResult]) error {
	ctx := stream.Context()
	a, err := s.applyStream(ctx, stream)
	if a != nil {
		for _, r := range a.results {
			if serr := stream.Send(r); serr != nil && err == nil {
				err = serr
			}
		}
	}
	if err != nil {
		return err
	}
	if err := s.record(ctx, a); err != nil {
		return err
	}
	return s.verify(ctx, a)
}

// applyStream receives, decodes and applies a whole stream of manifests (see Provision).
func (s *Server) applyStream(ctx context.Context, stream stage.Receiver[katastromav1.Manifest]) (*applier, error) {
	in, err := stage.RecvAll(stream)
	if err != nil {
		return nil, err
	}
	if err := pipeline.CheckCount(ctx, len(in)); err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	a, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	if len(in) == 0 && !a.pc.Offboard {
		return nil, status.Error(codes.FailedPrecondition,
			"the render produced no objects; refusing to record an empty set (annotate the source target with "+
				pipeline.AnnotationOffboard+"=true to remove everything)")
	}
	objs := make([]*unstructured.Unstructured, 0, len(in))
	for i, m := range in {
		u, err := pipeline.Decode(m)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "manifest %d: %v", i, err)
		}
		objs = append(objs, u)
	}
	if err := a.applyAll(ctx, objs); err != nil {
		return a, err
	}
	return a, s.finish(ctx, a)
}

// Provision applies every manifest; after a complete success it records the inventory, verifies the applied
// objects' health and forwards the applied set to the pruner (when Next is set). A failed or incomplete apply or a
// failed verify never reaches the pruner.
func (s *Server) Provision(stream grpc.ClientStreamingServer[katastromav1.Manifest, katastromav1.StageSummary]) (err error) {
	ctx := stream.Context()
	a, err := s.applyStream(ctx, stream)
	if err != nil {
		return err
	}
	if err := s.record(ctx, a); err != nil {
		return err
	}
	// After the record: the inventory lists what was applied whether or not it turns healthy, so a later event
	// prunes it. Before the pruner: an unhealthy set does not remove what the previous commit deployed.
	if err := s.verify(ctx, a); err != nil {
		return err
	}
	sum := &katastromav1.StageSummary{Stage: StageName, Objects: int32(len(a.results)), Results: a.results}
	if s.Next != nil {
		if sum.Downstream, err = stage.Forward(ctx, s.Next.Prune, a.applied); err != nil {
			return fmt.Errorf("pruning: %w", err)
		}
	}
	return stream.SendAndClose(sum)
}
