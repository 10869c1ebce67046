package provisioner

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quartet-dev/quartet-operator/internal/gitops/inventory"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Two source targets that declare the same object would take it from each other on every event (server-side apply
// with force), each pruning nothing and repairing "drift" forever. So before writing, an object live under another
// target's label is checked: while that target exists and its inventory lists the object, the event is refused
// naming both. An object its previous target no longer lists (a move over two pushes, a deleted target) is
// adopted, and so is one whose previous target runs in the same event (a move in one push: its pruner waits for
// this one, see pruner/moves.go).

// checkClaim refuses u when another source target owns it (see above); nil when u is free or this target's.
func (a *applier) checkClaim(ctx context.Context, u *unstructured.Unstructured) error {
	ours := u.GetLabels()[pipeline.LabelSourceTarget]
	if ours == "" {
		return nil
	}
	live, err := a.liveLabelled(ctx, u)
	if err != nil || live == nil {
		return err
	}
	owner := live.GetLabels()[pipeline.LabelSourceTarget]
	ns, name, ok := strings.Cut(owner, ".")
	if owner == ours || !ok {
		return nil // ours, or a hashed label naming no readable target: adopted as before
	}
	st := &corev1.ConfigMap{}
	if err := a.clients.Platform.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, st); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading source target %s/%s, which deployed this object: %w", ns, name, err)
	}
	if st.Labels[pipeline.LabelType] != pipeline.TypeSourceTarget || st.Annotations[pipeline.AnnotationEventID] == a.pc.EventID {
		return nil
	}
	inv, _, err := inventory.Read(ctx, a.clients.Platform, ns, name)
	if err != nil {
		return err
	}
	key := pipeline.RefKey(pipeline.Ref(u))
	for _, r := range inv.Objects {
		if pipeline.RefKey(r) == key {
			return fmt.Errorf("source target %s/%s deploys this object too (its inventory lists it); one object "+
				"cannot belong to two source targets: remove it from one of them, or move it in one push", ns, name)
		}
	}
	return nil
}
