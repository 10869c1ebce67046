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

// releaseSourceTargets lets go of the source targets the Platform being deleted holds. Targets pinned to it
// (pipeline.AnnotationServedBy) are unpinned, so another Platform's source handler takes them over with its next
// lease instead of leaving them to a Platform that is gone. Once it is the last Platform it also removes the
// prune-on-delete finalizer from every source target: only a Platform's source handler runs the prune that
// finalizer waits for, so without one a deleted target, and the tenant namespace holding it, would never finish
// deleting (an uninstall would hang). What the targets deployed stays in place, as after orphan-on-delete. While
// another Platform remains, its source handler serves the targets and no finalizer is released.
func (r *PlatformReconciler) releaseSourceTargets(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	var platforms gitopsv1alpha1.PlatformList
	if err := r.List(ctx, &platforms); err != nil {
		return fmt.Errorf("listing Platforms: %w", err)
	}
	last := true
	for _, other := range platforms.Items {
		if other.UID != p.UID && other.DeletionTimestamp.IsZero() {
			last = false
		}
	}
	var targets corev1.ConfigMapList
	if err := r.List(ctx, &targets, client.MatchingLabels{pipeline.LabelType: pipeline.TypeSourceTarget}); err != nil {
		return fmt.Errorf("listing source targets: %w", err)
	}
	self := p.Namespace + "/" + p.Name
	for i := range targets.Items {
		cm := &targets.Items[i]
		unpin := cm.Annotations[pipeline.AnnotationServedBy] == self
		release := last && controllerutil.ContainsFinalizer(cm, pipeline.FinalizerPrune)
		if !unpin && !release {
			continue
		}
		// Optimistic lock: a lease write racing this one conflicts and the next reconcile looks again.
		patch := client.MergeFromWithOptions(cm.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if unpin {
			delete(cm.Annotations, pipeline.AnnotationServedBy)
		}
		if release {
			controllerutil.RemoveFinalizer(cm, pipeline.FinalizerPrune)
		}
		if err := r.Patch(ctx, cm, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("releasing source target %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	return nil
}
