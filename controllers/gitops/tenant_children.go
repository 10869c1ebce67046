package gitops

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
)

// children writes the pipeline identities of one tenant namespace and makes sure its webhook Secret exists.
func (r *TenantReconciler) children(ctx context.Context, t *gitopsv1alpha1.Tenant, ns string) error {
	for sa, verbs := range map[string][]string{
		gitopsv1alpha1.ProvisionerServiceAccount: tenancy.ProvisionerVerbs,
		gitopsv1alpha1.PrunerServiceAccount:      tenancy.PrunerVerbs,
	} {
		if err := r.identity(ctx, t, ns, sa, tenancy.Rules(t.Spec.Resources, verbs)); err != nil {
			return err
		}
	}
	return r.webhookSecret(ctx, t, ns)
}

// identity writes one ServiceAccount with its Role and RoleBinding of the same name.
func (r *TenantReconciler) identity(ctx context.Context, t *gitopsv1alpha1.Tenant, ns, name string, rules []rbacv1.PolicyRule) error {
	labels := map[string]string{gitopsv1alpha1.LabelTenant: t.Name}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := r.write(ctx, t, sa, func() { sa.Labels = merge(sa.Labels, labels) }); err != nil {
		return err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "katastroma-" + name}}
	if err := r.write(ctx, t, role, func() {
		role.Labels = merge(role.Labels, labels)
		role.Rules = rules
	}); err != nil {
		return err
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "katastroma-" + name}}
	return r.write(ctx, t, rb, func() {
		rb.Labels = merge(rb.Labels, labels)
		// roleRef is immutable; it never changes because the Role's name is fixed.
		rb.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}
		rb.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}
	})
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
