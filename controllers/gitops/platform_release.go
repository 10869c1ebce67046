package gitops

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// releaseSourceTargets removes the prune-on-delete finalizer from every source target once the Platform being
// deleted is the last one: only a Platform's source handler runs the prune that finalizer waits for, so without
// one a deleted target, and the tenant namespace holding it, would never finish deleting (an uninstall would
// hang). What the targets deployed stays in place, as after orphan-on-delete. While another Platform remains,
// its source handler serves the targets and nothing is released.
func (r *PlatformReconciler) releaseSourceTargets(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	var platforms gitopsv1alpha1.PlatformList
	if err := r.List(ctx, &platforms); err != nil {
		return fmt.Errorf("listing Platforms: %w", err)
	}
	for _, other := range platforms.Items {
		if other.UID != p.UID && other.DeletionTimestamp.IsZero() {
			return nil
		}
	}
	var targets corev1.ConfigMapList
	if err := r.List(ctx, &targets, client.MatchingLabels{pipeline.LabelType: pipeline.TypeSourceTarget}); err != nil {
		return fmt.Errorf("listing source targets: %w", err)
	}
	for i := range targets.Items {
		cm := &targets.Items[i]
		if !controllerutil.ContainsFinalizer(cm, pipeline.FinalizerPrune) {
			continue
		}
		// Optimistic lock: a lease write racing this one conflicts and the next reconcile looks again.
		patch := client.MergeFromWithOptions(cm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.RemoveFinalizer(cm, pipeline.FinalizerPrune)
		if err := r.Patch(ctx, cm, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing source target %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return nil
}
