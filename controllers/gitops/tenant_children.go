package gitops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
)

// children writes the pipeline identities of one tenant namespace and makes sure its webhook Secret exists.
func (r *TenantReconciler) children(ctx context.Context, t *gitopsv1alpha1.Tenant, ns string) error {
	for sa, role := range map[string]string{
		gitopsv1alpha1.ProvisionerServiceAccount: platform.TenantProvisionerClusterRole,
		gitopsv1alpha1.PrunerServiceAccount:      platform.TenantPrunerClusterRole,
	} {
		if err := r.identity(ctx, t, ns, sa, role); err != nil {
			return err
		}
	}
	return r.webhookSecret(ctx, t, ns)
}

// identity writes one ServiceAccount and its RoleBinding to the shipped tenant ClusterRole. The operator binds
// that role by name and writes no rule: what tenants may deploy is the administrators' to extend (aggregation).
// A binding an earlier version made to a Role of the Tenant's own is replaced (roleRef is immutable) and the Role
// deleted.
func (r *TenantReconciler) identity(ctx context.Context, t *gitopsv1alpha1.Tenant, ns, name, clusterRole string) error {
	labels := map[string]string{gitopsv1alpha1.LabelTenant: t.Name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := r.write(ctx, t, sa, func() { sa.Labels = merge(sa.Labels, labels) }); err != nil {
		return err
	}
	want := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "katastroma-" + name}}
	if err := r.Get(ctx, client.ObjectKeyFromObject(rb), rb); err == nil && rb.RoleRef != want {
		uid := rb.UID
		if err := r.Delete(ctx, rb, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing RoleBinding %s: %w", rb.Name, err)
		}
		if rb.RoleRef.Kind == "Role" {
			old := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rb.RoleRef.Name}}
			if err := r.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting the Role %s an earlier version wrote: %w", old.Name, err)
			}
		}
		fresh := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rb.Name, Labels: labels},
			RoleRef: want, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}}
		if err := controllerutil.SetControllerReference(t, fresh, r.Scheme()); err != nil {
			return err
		}
		// Directly, not through the cache, which still holds the binding just deleted.
		if err := r.Create(ctx, fresh); err != nil {
			return fmt.Errorf("creating RoleBinding %s: %w", rb.Name, err)
		}
		return nil
	} else if client.IgnoreNotFound(err) != nil {
		return err
	}
	rb = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "katastroma-" + name}}
	return r.write(ctx, t, rb, func() {
		rb.Labels = merge(rb.Labels, labels)
		rb.RoleRef = want
		rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	})
}

// missingGrants reports, as a message naming what an administrator must create, which of spec.resources the
// shipped tenant ClusterRoles (with every ClusterRole aggregated into them) do not grant; "" when they grant all.
func (r *TenantReconciler) missingGrants(ctx context.Context, t *gitopsv1alpha1.Tenant) (string, error) {
	var msgs []string
	for _, id := range []struct {
		label string
		verbs []string
		role  string
	}{
		{platform.AggregateToTenantProvisioner, tenancy.ProvisionerVerbs, platform.TenantProvisionerClusterRole},
		{platform.AggregateToTenantPruner, tenancy.PrunerVerbs, platform.TenantPrunerClusterRole},
	} {
		var roles rbacv1.ClusterRoleList
		if err := r.List(ctx, &roles, client.MatchingLabels{id.label: "true"}); err != nil {
			return "", fmt.Errorf("listing the ClusterRoles aggregated into %s: %w", id.role, err)
		}
		var rules []rbacv1.PolicyRule
		for _, cr := range roles.Items {
			rules = append(rules, cr.Rules...)
		}
		if missing := tenancy.Missing(t.Spec.Resources, id.verbs, rules); len(missing) > 0 {
			msgs = append(msgs, fmt.Sprintf("%s does not grant %s %s: an administrator creates a ClusterRole labelled %s: \"true\" granting them",
				id.role, strings.Join(id.verbs, ", "), strings.Join(missing, ", "), id.label))
		}
	}
	if len(msgs) == 0 {
		return "", nil
	}
	return "spec.resources: " + strings.Join(msgs, "; ") + " (docs/gitops.md, \"Granting tenants a new kind\")", nil
}

// write creates or updates obj with mutate applied and the Tenant as controller; an unchanged object is not
// written.
func (r *TenantReconciler) write(ctx context.Context, t *gitopsv1alpha1.Tenant, obj client.Object, mutate func()) error {
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, obj, func() error {
		mutate()
		return controllerutil.SetControllerReference(t, obj, r.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// webhookSecret creates the GitHub webhook HMAC key once. It is never rewritten: a key that changed under
// GitHub's feet would fail every delivery.
func (r *TenantReconciler) webhookSecret(ctx context.Context, t *gitopsv1alpha1.Tenant, ns string) error {
	key := types.NamespacedName{Namespace: ns, Name: gitopsv1alpha1.WebhookSecretName}
	existing := &corev1.Secret{}
	err := r.APIReader.Get(ctx, key, existing)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name,
		Labels: map[string]string{gitopsv1alpha1.LabelTenant: t.Name}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{gitopsv1alpha1.WebhookSecretKey: []byte(hex.EncodeToString(raw))}}
	if err := controllerutil.SetControllerReference(t, s, r.Scheme()); err != nil {
		return err
	}
	if err := r.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook Secret: %w", err)
	}
	return nil
}

func merge(into, add map[string]string) map[string]string {
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range add {
		into[k] = v
	}
	return into
}
