package provisioner

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
}

// leaseError maps a lease or context problem to a gRPC status.
func leaseError(err error) error {
	var lost *inventory.ErrLeaseLost
	if errors.As(err, &lost) {
		return status.Error(codes.Aborted, err.Error())
	}
	return status.Error(codes.Unavailable, err.Error())
}

func (s *Server) begin(ctx context.Context) (*applier, error) {
	pc := pipeline.FromContext(ctx)
	if err := pc.Validate(); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err := inventory.CheckLease(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID); err != nil {
		return nil, leaseError(err)
	}
	as, err := s.Clients.As(pc.Namespace, ServiceAccount)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &applier{clients: s.Clients, as: as, pc: pc}, nil
}

// record re-checks the lease and records the applied set as the inventory, moving whatever the previous
// inventory had and this set lacks to the prune list.
func (s *Server) record(ctx context.Context, a *applier) error {
	pc := a.pc
	if err := inventory.CheckLease(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID); err != nil {
		return leaseError(err)
	}
	old, cm, err := inventory.Read(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	inv := &inventory.Inventory{Commit: pc.Commit, Objects: a.applied,
		Prune: inventory.Minus(append(old.Objects, old.Prune...), a.applied)}
	if err := inventory.Write(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, cm, inv); err != nil {
		return status.Errorf(codes.Aborted, "recording the inventory: %v", err)
	}
	return nil
}

func (s *Server) finish(span trace.Span, a *applier) error {
	counts := map[string]int{}
	for _, r := range a.results {
		counts[r.GetAction()]++
	}
	for action, n := range counts {
		stage.CountObject(StageName, action, n)
	}
	span.SetAttributes(attribute.Int("provisioner.applied", counts[ActionApplied]),
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

// ProvisionStream applies each manifest as it arrives and streams its result back. When every object applied,
// it records the inventory at the end; it never prunes.
func (s *Server) ProvisionStream(stream grpc.BidiStreamingServer[katastromav1.Manifest, katastromav1.ObjectResult]) (err error) {
	ctx, span := stage.Start(stream.Context(), StageName)
	defer func() { stage.End(span, err) }()
	a, err := s.begin(ctx)
	if err != nil {
		return err
	}
	n := 0
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		n++
		u, err := pipeline.Decode(m)
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		if err := stream.Send(a.add(ctx, u)); err != nil {
			return err
		}
	}
	if err := pipeline.CheckCount(ctx, n); err != nil {
		return status.Error(codes.DataLoss, err.Error())
	}
	if err := s.finish(span, a); err != nil {
		return err
	}
	return s.record(ctx, a)
}

// Provision applies every manifest; after a complete success it records the inventory and forwards the applied
// set to the pruner (when Next is set). A failed or incomplete apply never reaches the pruner.
func (s *Server) Provision(stream grpc.ClientStreamingServer[katastromav1.Manifest, katastromav1.StageSummary]) (err error) {
	ctx, span := stage.Start(stream.Context(), StageName)
	defer func() { stage.End(span, err) }()
	in, err := stage.RecvAll(stream)
	if err != nil {
		return err
	}
	if err := pipeline.CheckCount(ctx, len(in)); err != nil {
		return status.Error(codes.DataLoss, err.Error())
	}
	a, err := s.begin(ctx)
	if err != nil {
		return err
	}
	if len(in) == 0 && !a.pc.Offboard {
		return status.Error(codes.FailedPrecondition,
			"the render produced no objects; refusing to record an empty set (annotate the source target with "+
				pipeline.AnnotationOffboard+"=true to remove everything)")
	}
	objs := make([]*unstructured.Unstructured, 0, len(in))
	for i, m := range in {
		u, err := pipeline.Decode(m)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "manifest %d: %v", i, err)
		}
		objs = append(objs, u)
	}
	a.applyAll(ctx, objs)
	if err := s.finish(span, a); err != nil {
		return err
	}
	if err := s.record(ctx, a); err != nil {
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
