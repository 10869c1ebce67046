package gitops

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// deleteClusterBindings deletes p's ClusterRoleBindings. One at a time: the operator is not granted
// deletecollection.
func (r *PlatformReconciler) deleteClusterBindings(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	var crbs rbacv1.ClusterRoleBindingList
	if err := r.List(ctx, &crbs, client.MatchingLabels{platform.PlatformLabel: platform.OwnerValue(p)}); err != nil {
		return fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	for i := range crbs.Items {
		if err := r.Delete(ctx, &crbs.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ClusterRoleBinding %s: %w", crbs.Items[i].Name, err)
		}
	}
	return nil
}

// clusterRBAC binds a stage's ServiceAccount to its shipped ClusterRole, with a binding labelled for the finalizer
// to find. An existing binding labelled for another Platform is refused rather than rewritten
// (platform.ConflictError).
func (r *PlatformReconciler) clusterRBAC(ctx context.Context, p *gitopsv1alpha1.Platform, stage string) error {
	crb := platform.ClusterRoleBinding(p, stage)
	if crb == nil {
		return nil
	}
	live := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crb.Name}}
	return r.writeBinding(ctx, p, "ClusterRoleBinding", live, crb, crb.RoleRef, func() {
		live.Labels, live.RoleRef, live.Subjects = crb.Labels, crb.RoleRef, crb.Subjects
	})
}

// errRoleRefChanged stops an update of a binding whose roleRef differs: roleRef is immutable.
var errRoleRefChanged = errors.New("roleRef changed")

// writeBinding creates or updates a binding of p. A binding of p that refers to another role (one an older
// operator bound to the per-Platform roles it created) is deleted and created again, since roleRef is immutable.
func (r *PlatformReconciler) writeBinding(ctx context.Context, p *gitopsv1alpha1.Platform, kind string,
	live, desired client.Object, ref rbacv1.RoleRef, set func()) error {
	key := client.ObjectKeyFromObject(desired)
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, live, func() error {
		if err := platform.CheckOwner(p, kind, live); err != nil {
			return err
		}
		if live.GetResourceVersion() != "" && roleRef(live) != ref {
			return errRoleRefChanged
		}
		set()
		return nil
	})
	if errors.Is(err, errRoleRefChanged) {
		uid := live.GetUID()
		if err := r.Delete(ctx, live, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s to change its roleRef: %w", kind, key, err)
		}
		err = r.Create(ctx, desired.DeepCopyObject().(client.Object))
	}
	if err != nil {
		return fmt.Errorf("writing %s %s: %w", kind, key, err)
	}
	return nil
}

func roleRef(binding client.Object) rbacv1.RoleRef {
	switch b := binding.(type) {
	case *rbacv1.ClusterRoleBinding:
		return b.RoleRef
	case *rbacv1.RoleBinding:
		return b.RoleRef
	}
	return rbacv1.RoleRef{}
}

// sourceTenantRBAC binds the source stage's tenant ClusterRole in every tenant namespace and removes the bindings
// from namespaces that are no longer tenants. They cannot be owned across namespaces: the finalizer removes them
// by label.
func (r *PlatformReconciler) sourceTenantRBAC(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	var nss corev1.NamespaceList
	if err := r.List(ctx, &nss, client.HasLabels{gitopsv1alpha1.LabelTenant}); err != nil {
		return fmt.Errorf("listing tenant namespaces: %w", err)
	}
	keep := map[string]bool{}
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp != nil {
			continue
		}
		keep[ns.Name] = true
		rb := platform.SourceTenantRoleBinding(p, ns.Name)
		live := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: rb.Name}}
		if err := r.writeBinding(ctx, p, "RoleBinding", live, rb, rb.RoleRef, func() {
			live.Labels, live.RoleRef, live.Subjects = rb.Labels, rb.RoleRef, rb.Subjects
		}); err != nil {
			return err
		}
	}
	return r.pruneSourceTenantRBAC(ctx, p, keep)
}

// deleteOldRoles deletes the ClusterRoles and the source stage's tenant Roles that operators before the shipped
// roles created for p, once writeBinding has rebound every binding of p to the shipped roles.
func (r *PlatformReconciler) deleteOldRoles(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	sel := client.MatchingLabels{platform.PlatformLabel: platform.OwnerValue(p)}
	var crs rbacv1.ClusterRoleList
	if err := r.List(ctx, &crs, sel); err != nil {
		return fmt.Errorf("listing old ClusterRoles: %w", err)
	}
	for i := range crs.Items {
		if err := r.Delete(ctx, &crs.Items[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old ClusterRole %s: %w", crs.Items[i].Name, err)
		}
	}
	var roles rbacv1.RoleList
	if err := r.List(ctx, &roles, sel); err != nil {
		return fmt.Errorf("listing old Roles: %w", err)
	}
	for i := range roles.Items {
		// pharos's Role, in the Platform's namespace, is current.
		if role := &roles.Items[i]; role.Name == platform.ClusterName(p, gitopsv1alpha1.StageSource) {
			if err := r.Delete(ctx, role); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting old Role %s/%s: %w", role.Namespace, role.Name, err)
			}
		}
	}
	return nil
}

// pruneSourceTenantRBAC deletes the source stage's tenant RoleBindings outside the keep namespaces (all of them when
// keep is nil).
func (r *PlatformReconciler) pruneSourceTenantRBAC(ctx context.Context, p *gitopsv1alpha1.Platform, keep map[string]bool) error {
	sel := client.MatchingLabels{platform.PlatformLabel: platform.OwnerValue(p)}
	var rbs rbacv1.RoleBindingList
	if err := r.List(ctx, &rbs, sel); err != nil {
		return err
	}
	for i := range rbs.Items {
		// By name: pharos's RoleBinding, in the Platform's namespace, goes with its owner reference.
		if rb := &rbs.Items[i]; rb.Name == platform.ClusterName(p, gitopsv1alpha1.StageSource) && !keep[rb.Namespace] {
			if err := r.Delete(ctx, rb); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

// allPlatforms maps any namespace label change to every Platform (there are few).
func (r *PlatformReconciler) allPlatforms(ctx context.Context, _ client.Object) []reconcile.Request {
	var list gitopsv1alpha1.PlatformList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}
