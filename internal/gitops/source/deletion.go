package source

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// FinalizerPrune holds a deleted source target until what it deployed is pruned.
const FinalizerPrune = pipeline.FinalizerPrune

// AnnotationOrphanOnDelete set to "true" on a source target leaves what it deployed in place when it is deleted.
const AnnotationOrphanOnDelete = "katastroma.org/orphan-on-delete"

// EventDelete is the offboarding event that runs when a source target is deleted (span attribute event.type).
const EventDelete = "delete"

// deletionRetry spaces the prune attempts of a deleted target whose last one failed.
const deletionRetry = time.Minute

// deletionStep is what the periodic pass does about a source target's deletion.
type deletionStep int

const (
	stepNone    deletionStep = iota
	stepPrune                // run the offboarding event
	stepRelease              // remove the finalizer: the target may go
)

// targetState is what deletionStepFor needs besides the ConfigMap.
type targetState struct {
	// inventory: the target's inventory ConfigMap exists (something deployed is recorded, or left to prune).
	inventory bool
	// namespaceTerminating: the namespace is being deleted; its objects go with it, and the tenant's pruner
	// identity may already be gone.
	namespaceTerminating bool
	leaseActive          bool
	// triedRecently: a prune of this deleted target started less than deletionRetry ago.
	triedRecently bool
	// successor: another source target of the namespace is annotated renamed-from this one; it takes the
	// objects and the inventory over (provisioner/rename.go), so nothing is pruned.
	successor bool
}

// deletionStepFor decides. A deleted target is pruned exactly like an offboarding (the pruner's guards apply:
// only objects its inventory lists that still carry its label, a lease check before each kind, what could not
// be deleted stays listed and the target stays until a later attempt succeeds), unless it opted out.
func deletionStepFor(cm *corev1.ConfigMap, s targetState) deletionStep {
	switch {
	case cm.DeletionTimestamp.IsZero(), !slices.Contains(cm.Finalizers, FinalizerPrune):
		return stepNone
	case cm.Annotations[AnnotationOrphanOnDelete] == "true", s.namespaceTerminating, !s.inventory, s.successor:
		return stepRelease
	case s.leaseActive || s.triedRecently:
		return stepNone
	}
	return stepPrune
}

// deletions runs the deletion steps of every source target listed by the periodic pass.
func (h *Handler) deletions(ctx context.Context, targets []corev1.ConfigMap, now time.Time) {
	logger := log.FromContext(ctx)
	successors := map[string]bool{}
	for _, cm := range targets {
		if p := cm.Annotations[pipeline.AnnotationRenamedFrom]; p != "" && p != cm.Name && cm.DeletionTimestamp.IsZero() {
			successors[cm.Namespace+"/"+p] = true
		}
	}
	for i := range targets {
		cm := &targets[i]
		if servedHere(cm, h.Lease.Platform) != nil {
			continue // the Platform it is pinned to prunes or releases it
		}
		st, err := h.targetState(ctx, cm, now)
		if err != nil {
			logger.Info("source target deletion check failed", "sourceTarget", cm.Namespace+"/"+cm.Name, "error", err.Error())
			continue
		}
		st.successor = successors[cm.Namespace+"/"+cm.Name]
		switch deletionStepFor(cm, st) {
		case stepRelease:
			err = h.releaseTarget(ctx, cm)
		case stepPrune:
			h.rec.mu.Lock()
			h.rec.deleting[cm.Namespace+"/"+cm.Name] = now
			h.rec.mu.Unlock()
			err = h.startTargetEvent(ctx, cm, EventDelete, cm.Annotations[pipeline.AnnotationDeployed], "", true)
		}
		if err != nil {
			logger.Info("source target deletion step failed", "sourceTarget", cm.Namespace+"/"+cm.Name, "error", err.Error())
		}
	}
}

func (h *Handler) targetState(ctx context.Context, cm *corev1.ConfigMap, now time.Time) (targetState, error) {
	st := targetState{leaseActive: h.Lease.Active(cm, now)}
	if cm.DeletionTimestamp.IsZero() {
		return st, nil
	}
	_, inv, err := inventory.Read(ctx, h.Client, cm.Namespace, cm.Name)
	if err != nil {
		return st, err
	}
	st.inventory = inv != nil
	ns := &corev1.Namespace{}
	if err := h.Client.Get(ctx, types.NamespacedName{Name: cm.Namespace}, ns); err != nil {
		return st, fmt.Errorf("reading namespace %s: %w", cm.Namespace, err)
	}
	st.namespaceTerminating = !ns.DeletionTimestamp.IsZero()
	h.rec.mu.Lock()
	last, ok := h.rec.deleting[cm.Namespace+"/"+cm.Name]
	h.rec.mu.Unlock()
	st.triedRecently = ok && now.Sub(last) < deletionRetry
	return st, nil
}

// releaseTarget removes the finalizer with an update at the listed resourceVersion (a concurrent lease write
// conflicts and the next pass decides again), and the target goes.
func (h *Handler) releaseTarget(ctx context.Context, cm *corev1.ConfigMap) error {
	cm = cm.DeepCopy()
	if !controllerutil.RemoveFinalizer(cm, FinalizerPrune) {
		return nil
	}
	return h.Client.Update(ctx, cm)
}

// deletionEventAttrs are the span attributes of a deletion's offboarding event.
func deletionEventAttrs(cm *corev1.ConfigMap) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("commit", cm.Annotations[pipeline.AnnotationDeployed]),
		attribute.Bool("source_target.deleted", true)}
}
