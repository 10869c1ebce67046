package gitops

import (
	"context"
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

// clusterRBAC writes a stage's ClusterRole and ClusterRoleBinding, labelled for the finalizer to find. An existing
// object labelled for another Platform is refused rather than rewritten (platform.ConflictError).
func (r *PlatformReconciler) clusterRBAC(ctx context.Context, p *gitopsv1alpha1.Platform, stage string) error {
	cr, crb := platform.ClusterRole(p, stage), platform.ClusterRoleBinding(p, stage)
	if cr == nil {
		return nil
	}
	liveCR := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: cr.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, liveCR, func() error {
		if err := platform.CheckOwner(p, "ClusterRole", liveCR); err != nil {
			return err
		}
		liveCR.Labels, liveCR.Rules = cr.Labels, cr.Rules
		return nil
	}); err != nil {
		return fmt.Errorf("writing ClusterRole %s: %w", cr.Name, err)
	}
	liveCRB := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: crb.Name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, liveCRB, func() error {
		if err := platform.CheckOwner(p, "ClusterRoleBinding", liveCRB); err != nil {
			return err
		}
		liveCRB.Labels, liveCRB.RoleRef, liveCRB.Subjects = crb.Labels, crb.RoleRef, crb.Subjects
		return nil
	}); err != nil {
		return fmt.Errorf("writing ClusterRoleBinding %s: %w", crb.Name, err)
	}
	return nil
}

// sourceTenantRBAC writes the source stage's Role and RoleBinding into every tenant namespace and removes them
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
		role, rb := platform.SourceTenantRole(p, ns.Name)
		liveRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: role.Name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, liveRole, func() error {
			if err := platform.CheckOwner(p, "Role", liveRole); err != nil {
				return err
			}
			liveRole.Labels, liveRole.Rules = role.Labels, role.Rules
			return nil
		}); err != nil {
			return fmt.Errorf("writing Role %s/%s: %w", ns.Name, role.Name, err)
		}
		liveRB := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: rb.Name}}
		if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, liveRB, func() error {
			if err := platform.CheckOwner(p, "RoleBinding", liveRB); err != nil {
				return err
			}
			liveRB.Labels, liveRB.RoleRef, liveRB.Subjects = rb.Labels, rb.RoleRef, rb.Subjects
			return nil
		}); err != nil {
			return fmt.Errorf("writing RoleBinding %s/%s: %w", ns.Name, rb.Name, err)
		}
	}
	return r.pruneSourceTenantRBAC(ctx, p, keep)
}

// pruneSourceTenantRBAC deletes the Platform's Roles and RoleBindings outside the keep namespaces (all of them
// when keep is nil).
func (r *PlatformReconciler) pruneSourceTenantRBAC(ctx context.Context, p *gitopsv1alpha1.Platform, keep map[string]bool) error {
	sel := client.MatchingLabels{platform.PlatformLabel: platform.OwnerValue(p)}
	var rbs rbacv1.RoleBindingList
	if err := r.List(ctx, &rbs, sel); err != nil {
		return err
	}
	for i := range rbs.Items {
		// The Platform's own namespace holds pharos's Role, which the owner reference removes.
		if rb := &rbs.Items[i]; rb.Namespace != p.Namespace && !keep[rb.Namespace] {
			if err := r.Delete(ctx, rb); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	var roles rbacv1.RoleList
	if err := r.List(ctx, &roles, sel); err != nil {
		return err
	}
	for i := range roles.Items {
		if role := &roles.Items[i]; role.Namespace != p.Namespace && !keep[role.Namespace] {
			if err := r.Delete(ctx, role); err != nil && !apierrors.IsNotFound(err) {
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
