// Package kube holds small helpers shared by every reconciler: status patching and field indexes.
package kube

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// PatchStatusIfChanged writes obj's status as a merge patch against before, and makes no request at all when
// nothing changed, so a no-op reconcile never writes (and never bumps timestamps or resourceVersion).
func PatchStatusIfChanged(ctx context.Context, c client.Client, before, obj client.Object) error {
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	return c.Status().Patch(ctx, obj, client.MergeFrom(before))
}

// PatchStatusIfChangedOptimistic is PatchStatusIfChanged with a resourceVersion precondition, for a status that
// is one state machine's persisted state (several fields that only make sense together, such as a rollout's
// phase, stage and step). Reconciles read from an informer cache that can lag behind the previous reconcile's
// own write; without the precondition a decision made on that stale copy would be merged field by field onto
// the newer state and leave a mix no single decision produced. With it the API server answers 409 Conflict,
// the reconcile is retried with backoff and the retry reads the newer object. The precondition is obj's
// resourceVersion, so the reconciler's own earlier writes in the same pass (a finalizer) are not a conflict.
//
// The retry re-runs the whole reconcile at once, so a controller that must pace calls to a remote peer
// (Retry-After) keeps the plain merge patch.
func PatchStatusIfChangedOptimistic(ctx context.Context, c client.Client, before, obj client.Object) error {
	if equality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	base, ok := before.DeepCopyObject().(client.Object)
	if !ok {
		return fmt.Errorf("patching status of %T: the object cannot be copied", obj)
	}
	base.SetResourceVersion(obj.GetResourceVersion())
	return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

type indexKey struct {
	mgr   manager.Manager
	kind  string
	field string
}

var registeredIndexes sync.Map

// IndexField registers a field index once per manager, so several controllers can ask for the same index
// without the second registration failing.
func IndexField(ctx context.Context, mgr manager.Manager, obj client.Object, field string, extract client.IndexerFunc) error {
	gvk, err := mgr.GetClient().GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	key := indexKey{mgr: mgr, kind: gvk.String(), field: field}
	if _, loaded := registeredIndexes.LoadOrStore(key, true); loaded {
		return nil
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
		registeredIndexes.Delete(key)
		return err
	}
	return nil
}
