package agentrax_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// as is a client the API server sees as user (impersonated by the administrator).
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

// An agent's env may take a value from a Secret only if its author may read that Secret: the pods would read
// it with the namespace's rights on the author's behalf. Checked on create and on update, the refusal naming the
// field and the user.
func TestEnvSecretReferencesAreCheckedAgainstTheRequester(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	// alice may write agents and read Secret "model-key" only, not "db-password".
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-author"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{agentraxv1alpha1.GroupVersion.Group}, Resources: []string{"agentdeployments"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"model-key"}, Verbs: []string{"get"}},
	}}
	g.Expect(env.Client.Create(ctx, role)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}}})).To(Succeed())
	alice := as(t, "alice")
	secretEnv := func(name string) corev1.EnvVar {
		return corev1.EnvVar{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "value"}}}
	}

	refused := agentDeployment(ns, "borrower", "q", 1, 1, 0)
	refused.Spec.Env = append(refused.Spec.Env, secretEnv("db-password"))
	err := alice.Create(ctx, refused)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.env[1].valueFrom.secretKeyRef.name"))
	g.Expect(err.Error()).To(ContainSubstring(`user "alice" may not get secrets ` + ns + `/db-password`))

	ad := agentDeployment(ns, "reader", "q", 1, 1, 0)
	ad.Spec.Env = append(ad.Spec.Env, secretEnv("model-key"))
	g.Expect(alice.Create(ctx, ad)).To(Succeed(), "a Secret alice may read")

	// A patch, not an update: the controller writes the agent meanwhile (finalizer, status).
	patch := client.MergeFrom(ad.DeepCopy())
	ad.Spec.Env = append(ad.Spec.Env, secretEnv("db-password"))
	err = alice.Patch(ctx, ad, patch)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an update is checked too: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("spec.env[2].valueFrom.secretKeyRef.name"))
}
