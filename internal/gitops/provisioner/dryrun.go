package provisioner

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// A commit applies whole or not at all: before the first write every object that would be written is applied
// with dryRun=All as the tenant's provisioner, so admission (webhooks, policies, quota, schema validation, RBAC)
// judges the whole set first. A refusal fails the event naming each refused object and writes nothing.
//
// Two kinds of object cannot be judged before anything is written: custom resources of a CRD the same commit
// creates (the kind does not exist yet) and objects in a Namespace the same commit creates. They are judged after
// the commit's Namespaces and CRDs are applied and established, before the first other write; a refusal then
// leaves only those Namespaces and CRDs written.

// dryRunOutcome is what the dry run says about one object.
type dryRunOutcome int

const (
	dryRunUnchanged dryRunOutcome = iota // live and identical: not written, not judged
	dryRunAccepted                       // will be written
	dryRunDeferred                       // judged once the commit's Namespaces and CRDs exist
	dryRunRefused
)

// dryRunPlan is the outcome of the dry run of a commit.
type dryRunPlan struct {
	// deferred are judged after the commit's foundations are applied.
	deferred []*unstructured.Unstructured
	// writes are the objects that will be written (accepted and deferred); writing holds the same objects, for
	// applyAll to tell a write batch from a run of unchanged objects.
	writes  []*katastromav1.ObjectRef
	writing map[*unstructured.Unstructured]bool
}

// refusal is one object the dry run refused.
type refusal struct {
	ref *katastromav1.ObjectRef
	err error
}

var (
	crdGroupKind       = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	namespaceGroupKind = schema.GroupKind{Kind: "Namespace"}
)

// commitFoundations are the kinds defined by the CRDs of a commit (true when namespaced) and the Namespaces it
// creates.
type commitFoundations struct {
	kinds      map[schema.GroupKind]bool
	namespaces map[string]bool
}

func foundationsOf(objs []*unstructured.Unstructured) commitFoundations {
	f := commitFoundations{kinds: map[schema.GroupKind]bool{}, namespaces: map[string]bool{}}
	for _, u := range objs {
		switch u.GroupVersionKind().GroupKind() {
		case crdGroupKind:
			group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
			f.kinds[schema.GroupKind{Group: group, Kind: kind}] = scope != "Cluster"
		case namespaceGroupKind:
			f.namespaces[u.GetName()] = true
		}
	}
	return f
}

// dryRunAll judges every object of a commit (applyWorkers at once). It fails with every refusal named.
func (a *applier) dryRunAll(ctx context.Context, objs []*unstructured.Unstructured) (*dryRunPlan, error) {
	f := foundationsOf(objs)
	plan := &dryRunPlan{writing: map[*unstructured.Unstructured]bool{}}
	var refused []refusal
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, applyWorkers)
	for _, u := range objs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outcome, err := a.dryRun(ctx, u, f, true)
			mu.Lock()
			defer mu.Unlock()
			switch outcome {
			case dryRunRefused:
				refused = append(refused, refusal{ref: pipeline.Ref(u), err: err})
			case dryRunDeferred:
				plan.deferred = append(plan.deferred, u)
				plan.writes = append(plan.writes, pipeline.Ref(u))
				plan.writing[u] = true
			case dryRunAccepted:
				plan.writes = append(plan.writes, pipeline.Ref(u))
				plan.writing[u] = true
			}
		})
	}
	wg.Wait()
	return plan, a.refusedError(ctx, refused, len(objs), "nothing was applied")
}

// dryRunDeferred judges the objects that needed the commit's foundations, once those are applied.
func (a *applier) dryRunDeferred(ctx context.Context, deferred []*unstructured.Unstructured, total int) error {
	var refused []refusal
	for _, u := range deferred {
		if outcome, err := a.dryRun(ctx, u, commitFoundations{}, false); outcome == dryRunRefused {
			refused = append(refused, refusal{ref: pipeline.Ref(u), err: err})
		}
	}
	return a.refusedError(ctx, refused, total, "only the commit's Namespaces and CRDs were applied")
}

// dryRun judges one object. mayDefer lets an object that needs a foundation of the commit wait for it.
func (a *applier) dryRun(ctx context.Context, u *unstructured.Unstructured, f commitFoundations, mayDefer bool) (dryRunOutcome, error) {
	gvk := u.GroupVersionKind()
	if namespaced, ok := f.kinds[gvk.GroupKind()]; mayDefer && ok {
		if _, err := a.clients.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); meta.IsNoMatchError(err) {
			// Placed as apply will place it, so the intent record names the object that will be written.
			if namespaced && u.GetNamespace() == "" {
				u.SetNamespace(a.pc.Namespace)
			} else if !namespaced {
				u.SetNamespace("")
			}
			return dryRunDeferred, nil
		}
	}
	_, _, unchanged, err := a.prepare(ctx, u)
	switch {
	case err != nil:
		return dryRunRefused, err
	case unchanged:
		return dryRunUnchanged, nil
	}
	if err := a.checkClaim(ctx, u); err != nil {
		return dryRunRefused, err
	}
	_, err = a.serverSideApply(ctx, u.DeepCopy(), client.DryRunAll)
	switch {
	case err == nil:
		return dryRunAccepted, nil
	case mayDefer && apierrors.IsNotFound(err) && f.namespaces[u.GetNamespace()]:
		return dryRunDeferred, nil
	case dryRunUnsupported(err):
		// A webhook with side effects cannot be called in a dry run; the real apply is its only judge.
		return dryRunAccepted, nil
	}
	return dryRunRefused, err
}

// dryRunUnsupported is the API server's answer when a webhook that may have side effects would see a dry run.
func dryRunUnsupported(err error) bool {
	return apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "does not support dry run")
}

// maxRefusalsNamed bounds the refusals an error message lists.
const maxRefusalsNamed = 5

// refusedError records the refused objects as failed results and returns the stage's error (nil without
// refusals): FAILED_PRECONDITION, since the commit must change before it can apply.
func (a *applier) refusedError(ctx context.Context, refused []refusal, total int, what string) error {
	if len(refused) == 0 {
		return nil
	}
	sort.Slice(refused, func(i, j int) bool { return pipeline.RefKey(refused[i].ref) < pipeline.RefKey(refused[j].ref) })
	var named []string
	a.mu.Lock()
	for i, r := range refused {
		a.results = append(a.results, &katastromav1.ObjectResult{Object: r.ref, Action: ActionFailed, Error: r.err.Error()})
		a.failures++
		if i < maxRefusalsNamed {
			named = append(named, fmt.Sprintf("%s %s: %v", r.ref.GetKind(), objectName(r.ref), r.err))
		}
	}
	a.mu.Unlock()
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("provisioner.refused", len(refused)))
	more := ""
	if len(refused) > maxRefusalsNamed {
		more = fmt.Sprintf("; and %d more", len(refused)-maxRefusalsNamed)
	}
	return status.Errorf(codes.FailedPrecondition, "the dry run refused %d of %d objects, %s: %s%s", len(refused),
		total, what, strings.Join(named, "; "), more)
}

func objectName(r *katastromav1.ObjectRef) string {
	if r.GetNamespace() == "" {
		return r.GetName()
	}
	return r.GetNamespace() + "/" + r.GetName()
}

// recordIntent puts the objects about to be written for the first time on the inventory's prune list before the
// first write, fenced by the lease like every record. A commit that stops halfway (a crash, an apply the dry run
// could not foresee) therefore leaves nothing unrecorded: the next successful event either wants those objects
// (and takes them off the list) or prunes them. Objects the inventory already lists are not written again.
func (a *applier) recordIntent(ctx context.Context, writes []*katastromav1.ObjectRef) error {
	if len(writes) == 0 {
		return nil
	}
	pc := a.pc
	old, _, err := inventory.Read(ctx, a.clients.Platform, pc.Namespace, pc.SourceTarget)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	if len(inventory.Minus(writes, append(old.Objects, old.Prune...))) == 0 {
		return nil
	}
	err = inventory.Record(ctx, a.clients.Platform, pc.Namespace, pc.SourceTarget, pc.LeaseID,
		func(old *inventory.Inventory, _ bool) (*inventory.Inventory, bool) {
			fresh := inventory.Minus(writes, append(old.Objects, old.Prune...))
			if len(fresh) == 0 {
				return nil, false
			}
			return &inventory.Inventory{Commit: old.Commit, Objects: old.Objects,
				Prune: append(append([]*katastromav1.ObjectRef(nil), old.Prune...), fresh...)}, false
		}, nil)
	var lost *inventory.ErrLeaseLost
	if errors.As(err, &lost) {
		return LeaseError(err)
	}
	if err != nil {
		return status.Errorf(codes.Aborted, "recording the objects about to be applied: %v", err)
	}
	return nil
}
