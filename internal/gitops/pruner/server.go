// Package pruner deletes what a source target's inventory holds and the desired set lacks, in reversed order, as
// the tenant's pruner ServiceAccount after a lease check, and serves that as the PrunerService stage.
package pruner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/labeler"
	"github.com/quartet-dev/quartet-operator/internal/gitops/orderer"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/provisioner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// StageName names the pruner in spans and metrics.
const StageName = "pruner"

// ServiceAccount is the tenant ServiceAccount the pruner impersonates.
const ServiceAccount = "pruner"

// Server is the PrunerService. Orderer, when set, orders deletions (reversed); otherwise the same order is
// computed in process.
type Server struct {
	katastromav1.UnimplementedPrunerServiceServer
	Clients *provisioner.Clients
	Orderer katastromav1.OrdererServiceClient
	// SiblingWait bounds the wait for the other targets of a push before deleting (0: DefaultSiblingWait).
	SiblingWait time.Duration
}

func (s *Server) reversed(ctx context.Context, refs []*katastromav1.ObjectRef) ([]*katastromav1.ObjectRef, error) {
	objs := make([]*unstructured.Unstructured, 0, len(refs))
	for _, r := range refs {
		objs = append(objs, pipeline.RefObject(r))
	}
	if s.Orderer == nil {
		orderer.Sort(objs, true)
	} else {
		msgs := make([]*katastromav1.Manifest, 0, len(objs))
		for _, u := range objs {
			m, err := pipeline.Encode(u)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		}
		stream, err := s.Orderer.OrderStream(metadata.AppendToOutgoingContext(pipeline.WithCount(ctx, len(msgs)),
			pipeline.MDDirection, "reversed"))
		if err != nil {
			return nil, err
		}
		out, err := stage.Bidi(stream, msgs)
		if err != nil {
			return nil, fmt.Errorf("ordering deletions: %w", err)
		}
		objs = objs[:0]
		for _, m := range out {
			u, err := pipeline.Decode(m)
			if err != nil {
				return nil, err
			}
			objs = append(objs, u)
		}
	}
	out := make([]*katastromav1.ObjectRef, 0, len(objs))
	for _, u := range objs {
		out = append(out, pipeline.Ref(u))
	}
	return out, nil
}

func lease(err error) error { return provisioner.LeaseError(err) }

// prune deletes the stale objects for the desired set and returns a result per candidate.
func (s *Server) prune(ctx context.Context, desired []*katastromav1.ObjectRef) ([]*katastromav1.ObjectResult, error) {
	pc := pipeline.FromContext(ctx)
	if err := pc.Validate(); err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err := pipeline.CheckCount(ctx, len(desired)); err != nil {
		return nil, status.Error(codes.DataLoss, err.Error())
	}
	if len(desired) == 0 && !pc.Offboard {
		return nil, status.Error(codes.FailedPrecondition,
			"refusing to prune against an empty desired set without the offboarding flag")
	}
	if len(desired) > 0 && pc.Offboard {
		return nil, status.Error(codes.InvalidArgument, "offboarding takes an empty desired set")
	}
	target, err := inventory.LeasedTarget(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID)
	if err != nil {
		return nil, lease(err)
	}
	if err := s.waitForSiblings(ctx, pc); err != nil {
		return nil, err
	}
	inv, _, err := inventory.Read(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	candidates := append(append([]*katastromav1.ObjectRef(nil), inv.Objects...), inv.Prune...)
	owners := []string{labeler.LabelValue(pc.Namespace + "." + pc.SourceTarget)}
	// A renamed target adopts its predecessor's inventory and prunes under its label too (rename.go).
	pred, adopted, adoptedCM, err := s.predecessor(ctx, target)
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if pred != "" {
		owners = append(owners, labeler.LabelValue(pc.Namespace+"."+pred))
	}
	if adopted != nil {
		candidates = append(append(candidates, adopted.Objects...), adopted.Prune...)
	}
	stale, err := s.reversed(ctx, inventory.Minus(candidates, desired))
	if err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	as, err := s.Clients.As(pc.Namespace, ServiceAccount)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	var results []*katastromav1.ObjectResult
	var left []*katastromav1.ObjectRef
	var batch schema.GroupKind
	inBatch := 0
	for i, r := range stale {
		// Deletions of one kind, at most provisioner.MaxBatch of them, are a write batch: the lease is checked
		// before each, so a superseded event stops deleting as soon as a newer one holds the source target (which
		// prunes from the same inventory).
		inBatch++
		if gk := pipeline.RefObject(r).GroupVersionKind().GroupKind(); i == 0 || gk != batch || inBatch > provisioner.MaxBatch {
			inBatch = 1
			if err := inventory.CheckLease(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID); err != nil {
				return results, lease(err)
			}
			batch = gk
		}
		action, err := s.deleteOne(ctx, as, r, owners)
		res := &katastromav1.ObjectResult{Object: r, Action: action}
		if err != nil {
			res.Error = err.Error()
			left = append(left, r)
		}
		results = append(results, res)
	}
	err = inventory.Record(ctx, s.Clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID,
		func(old *inventory.Inventory, exists bool) (*inventory.Inventory, bool) {
			switch {
			case pc.Offboard && len(left) == 0:
				return nil, exists
			case !exists && len(left) == 0:
				return nil, false
			}
			next := &inventory.Inventory{Commit: old.Commit, Objects: desired, Prune: left}
			if pc.Offboard {
				next.Objects = nil
			}
			return next, false
		}, nil)
	if err != nil {
		var lost *inventory.ErrLeaseLost
		if errors.As(err, &lost) {
			return results, lease(err)
		}
		return results, status.Errorf(codes.Aborted, "recording the inventory: %v", err)
	}
	if adoptedCM != nil {
		if err := s.dropAdopted(ctx, adoptedCM); err != nil {
			return results, status.Errorf(codes.Aborted, "removing the inventory adopted from source target %s/%s: %v",
				pc.Namespace, pred, err)
		}
	}
	if len(left) > 0 {
		return results, status.Errorf(codes.Aborted, "%d objects could not be pruned; first: %s", len(left),
			results[len(results)-1].GetError())
	}
	return results, nil
}

// deleteOne deletes one object as the tenant's pruner, unless it is gone, no longer carries one of owners as its
// source-target label (someone else owns it now) or opts out of pruning (AnnotationPrune).
func (s *Server) deleteOne(ctx context.Context, as client.Client, r *katastromav1.ObjectRef, owners []string) (string, error) {
	live, err := s.served(r)
	if err != nil {
		if isNoMatch(err) {
			return provisioner.ActionDeleted, nil // no version of the kind is served: nothing of it is left
		}
		return provisioner.ActionFailed, err
	}
	// Read as the tenant's pruner: it may read what it may delete, the Platform's identity reads no tenant kinds.
	err = as.Get(ctx, types.NamespacedName{Namespace: r.GetNamespace(), Name: r.GetName()}, live)
	if err != nil {
		if apierrors.IsNotFound(err) || isNoMatch(err) {
			return provisioner.ActionDeleted, nil
		}
		return provisioner.ActionFailed, err
	}
	if !slices.Contains(owners, live.GetLabels()[pipeline.LabelSourceTarget]) || live.GetAnnotations()[AnnotationPrune] == PruneDisabled {
		return provisioner.ActionSkipped, nil
	}
	// Preconditions: the object deleted is the one read and judged above, not one replaced or relabelled since
	// (another target taking it over moves its resourceVersion). A conflict keeps it on the prune list.
	uid, rv := live.GetUID(), live.GetResourceVersion()
	err = as.Delete(ctx, live, client.PropagationPolicy("Background"),
		client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil && !apierrors.IsNotFound(err) {
		return provisioner.ActionFailed, err
	}
	return provisioner.ActionDeleted, nil
}

// AnnotationPrune set to PruneDisabled on an object (in its manifest) keeps it when its source target no longer
// renders it, is deleted or offboarded: the pruner leaves it in place and forgets it, as Flux's
// kustomize.toolkit.fluxcd.io/prune: disabled does.
const (
	AnnotationPrune = "katastroma.org/prune"
	PruneDisabled   = "disabled"
)

// served returns an object to read r through: at its recorded version while that is served, otherwise at the
// kind's preferred version. The inventory keys objects without the version, so the recorded one may be a version
// a CRD has since dropped; the object is still there under another.
func (s *Server) served(r *katastromav1.ObjectRef) (*unstructured.Unstructured, error) {
	live := pipeline.RefObject(r)
	gvk := live.GroupVersionKind()
	if _, err := s.Clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil || !isNoMatch(err) {
		return live, err
	}
	m, err := s.Clients.Mapper.RESTMapping(gvk.GroupKind())
	if err != nil {
		return nil, err
	}
	live.SetGroupVersionKind(m.GroupVersionKind)
	return live, nil
}

func count(results []*katastromav1.ObjectResult) map[string]int {
	m := map[string]int{}
	for _, r := range results {
		m[r.GetAction()]++
	}
	return m
}

// PruneStream receives the desired set until the client half-closes, prunes and streams a result per candidate.
func (s *Server) PruneStream(stream grpc.BidiStreamingServer[katastromav1.ObjectRef, katastromav1.ObjectResult]) error {
	ctx := stream.Context()
	desired, err := stage.RecvAll(stream)
	if err != nil {
		return err
	}
	results, perr := s.prune(ctx, desired)
	for _, r := range results {
		if err := stream.Send(r); err != nil {
			return err
		}
	}
	return perr
}

// Prune receives the desired set, prunes and answers with a summary.
func (s *Server) Prune(stream grpc.ClientStreamingServer[katastromav1.ObjectRef, katastromav1.StageSummary]) error {
	ctx := stream.Context()
	desired, err := stage.RecvAll(stream)
	if err != nil {
		return err
	}
	results, err := s.prune(ctx, desired)
	c := count(results)
	for a, n := range c {
		stage.CountObject(ctx, StageName, a, n)
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("pruner.deleted", c[provisioner.ActionDeleted]))
	if err != nil {
		return err
	}
	return stream.SendAndClose(&katastromav1.StageSummary{Stage: StageName, Objects: int32(len(results)),
		Results: results})
}

func isNoMatch(err error) bool { return meta.IsNoMatchError(err) }
