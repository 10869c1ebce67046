package pruner

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// A ConfigMap cannot be renamed: a renamed source target is a new one, annotated katastroma.org/renamed-from with
// the old one's name (same namespace), and the old one is deleted. Without more, the old one's deletion would prune
// everything it deployed (a PVC would come back empty) and the new one would be refused, object by object, while
// the old inventory lists them. So the new target's provisioner takes the old one's objects over (its claim check
// lets them through), and its pruner adopts the old one's inventory: what the predecessor listed and the new commit
// does not declare is pruned here, under the predecessor's label too, and once this target's inventory is recorded
// the predecessor's inventory is deleted. The source handler's deletion pass releases a deleted target that has a
// successor without pruning anything.

// predecessor returns the source target that target replaces, its inventory and that inventory's ConfigMap ("" and
// nils when there is none, or nothing is left to adopt).
func (s *Server) predecessor(ctx context.Context, target *corev1.ConfigMap) (string, *inventory.Inventory,
	*corev1.ConfigMap, error) {
	pred := target.Annotations[pipeline.AnnotationRenamedFrom]
	if pred == "" || pred == target.Name {
		return "", nil, nil, nil
	}
	inv, cm, err := inventory.Read(ctx, s.Clients.Platform, target.Namespace, pred)
	if err != nil || cm == nil {
		return pred, nil, nil, err
	}
	return pred, inv, cm, nil
}

// dropAdopted deletes the predecessor's inventory once this target's inventory records what it held, at the version
// read: a predecessor that recorded meanwhile (still running) keeps it, and the next event adopts that too.
func (s *Server) dropAdopted(ctx context.Context, cm *corev1.ConfigMap) error {
	err := s.Clients.Platform.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
