// Package kube holds small helpers shared by every reconciler: status patching and field indexes.
package kube

import (
	"context"
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
