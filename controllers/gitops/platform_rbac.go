package gitops

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// stageSubject adds (present) or removes p's ServiceAccount of stage in the stage's shared ClusterRoleBinding,
// creating the binding when it is missing. A binding of that name bound to another role is someone else's: it is
// reported (platform.ConflictError), never rewritten. Conflicting writes by other Platforms are retried.
func (r *PlatformReconciler) stageSubject(ctx context.Context, p *gitopsv1alpha1.Platform, stage string, present bool) error {
	role := platform.StageClusterRole(stage)
	if role == "" {
		return nil
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
	subject := platform.StageSubject(p, stage)
	name := platform.SharedBindingName(stage)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crb := &rbacv1.ClusterRoleBinding{}
		err := r.Get(ctx, client.ObjectKey{Name: name}, crb)
		if apierrors.IsNotFound(err) {
			if !present {
				return nil
			}
			crb = &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: platform.SharedBindingLabels()},
				RoleRef: ref, Subjects: []rbacv1.Subject{subject}}
			if err := r.Create(ctx, crb); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(rbacv1.Resource("clusterrolebindings"), name, err)
				}
				return fmt.Errorf("creating ClusterRoleBinding %s: %w", name, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading ClusterRoleBinding %s: %w", name, err)
		}
		if crb.RoleRef != ref {
			if !present {
				return nil // someone else's binding: nothing of this Platform's to remove
			}
			return &platform.ConflictError{Kind: "ClusterRoleBinding", Name: name, Owner: "", RoleRef: crb.RoleRef.Name}
		}
		has := slices.Contains(crb.Subjects, subject)
		switch {
		case present && !has:
			crb.Subjects = append(crb.Subjects, subject)
		case !present && has:
			crb.Subjects = slices.DeleteFunc(crb.Subjects, func(s rbacv1.Subject) bool { return s == subject })
			if len(crb.Subjects) == 0 {
				// The last Platform left: the binding goes too, so an uninstall leaves nothing behind. The
				// resourceVersion precondition loses to a Platform adding itself meanwhile (a conflict, retried).
				rv := crb.ResourceVersion
				if err := r.Delete(ctx, crb, client.Preconditions{ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("deleting ClusterRoleBinding %s, which no Platform uses any more: %w", name, err)
				}
				return nil
			}
		default:
			return nil
		}
		if err := r.Update(ctx, crb); err != nil {
			return fmt.Errorf("updating the subjects of ClusterRoleBinding %s: %w", name, err)
		}
		return nil
	})
}

// pharosRBAC binds the shipped pharos ClusterRole in the Platform's namespace. A binding an earlier version made
// to a Role of its own is replaced (roleRef is immutable) and that Role deleted: the operator writes no Role.
func (r *PlatformReconciler) pharosRBAC(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	rb := platform.PharosRoleBinding(p)
	if err := controllerutil.SetControllerReference(p, rb, r.Scheme()); err != nil {
		return err
	}
	live := &rbacv1.RoleBinding{}
	err := r.Get(ctx, client.ObjectKeyFromObject(rb), live)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating RoleBinding %s: %w", rb.Name, err)
		}
		return nil
	case err != nil:
		return err
	case live.RoleRef != rb.RoleRef:
		uid := live.UID
		if err := r.Delete(ctx, live, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting RoleBinding %s to change its roleRef: %w", rb.Name, err)
		}
		if err := r.Create(ctx, rb); err != nil {
			return fmt.Errorf("creating RoleBinding %s: %w", rb.Name, err)
		}
		if live.RoleRef.Kind == "Role" {
			old := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: live.RoleRef.Name}}
			if err := r.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting the Role %s an earlier version made: %w", old.Name, err)
			}
		}
		return nil
	case !equality.Semantic.DeepEqual(live.Subjects, rb.Subjects) || !equality.Semantic.DeepEqual(live.Labels, rb.Labels):
		live.Subjects, live.Labels = rb.Subjects, rb.Labels
		return r.Update(ctx, live)
	}
	return nil
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

// sourceTenantRBAC binds the source stage's tenant ClusterRole in every claimed tenant namespace and removes the
// bindings from namespaces that are no longer. A namespace is claimed once its Tenant has set it up (the Tenant's
// status lists it) and it still carries that Tenant's label: a tenant label alone, which anyone creating a
// namespace can set, earns no binding. They cannot be owned across namespaces: the finalizer removes them by label.
func (r *PlatformReconciler) sourceTenantRBAC(ctx context.Context, p *gitopsv1alpha1.Platform) error {
	var nss corev1.NamespaceList
	if err := r.List(ctx, &nss, client.HasLabels{gitopsv1alpha1.LabelTenant}); err != nil {
		return fmt.Errorf("listing tenant namespaces: %w", err)
	}
	var tenants gitopsv1alpha1.TenantList
	if err := r.List(ctx, &tenants); err != nil {
		return fmt.Errorf("listing Tenants: %w", err)
	}
	claimed := map[string]string{} // namespace → the Tenant that set it up
	for _, t := range tenants.Items {
		if t.DeletionTimestamp != nil {
			continue
		}
		for _, ns := range t.Status.Namespaces {
			claimed[ns] = t.Name
		}
	}
	keep := map[string]bool{}
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp != nil || ns.Name == p.Namespace || claimed[ns.Name] != ns.Labels[gitopsv1alpha1.LabelTenant] {
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
