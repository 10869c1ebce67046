package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

func TestPlatformSourceRolesFollowTenantNamespacesAndConflictsAreRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, tenantNS := "katastroma-"+suffix(), "team-"+suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	tn := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNS, Labels: map[string]string{gitopsv1alpha1.LabelTenant: tenantNS},
		Annotations: map[string]string{gitopsv1alpha1.AnnotationGrantedTo: tenantNS}}}
	g.Expect(env.Client.Create(ctx, tn)).To(Succeed())
	// The namespace is claimed: a tenant label alone earns no binding (TestTenantNamespaceRoleBindingsFollowTheClaim).
	tenant := newTenant(tenantNS, tenantNS)
	g.Expect(env.Client.Create(ctx, tenant)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, tenant) })
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	// A ClusterRoleBinding under the pruner's shared name, binding another role, is there first (an earlier test's
	// shared binding is removed for it and restored by the controller afterwards).
	foreign := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: platform.SharedBindingName("pruner")},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}
	g.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, foreign))).To(Succeed())
	g.Eventually(func() error { return env.Client.Create(ctx, foreign.DeepCopy()) }).Should(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, foreign) })
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	roleKey := types.NamespacedName{Namespace: tenantNS, Name: platform.ClusterName(p, "source")}
	g.Eventually(func(g Gomega) {
		rb := &rbacv1.RoleBinding{}
		get(g, roleKey, rb)
		g.Expect(rb.RoleRef.Name).To(Equal(platform.SourceTenantClusterRole))
		got := &gitopsv1alpha1.Platform{}
		get(g, client.ObjectKeyFromObject(p), got)
		g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", gitopsv1alpha1.ConditionReady),
			HaveField("Status", metav1.ConditionFalse), HaveField("Reason", gitopsv1alpha1.ReasonRBACConflict),
			HaveField("Message", ContainSubstring("binds view, not the shipped role")))))
		crb := &rbacv1.ClusterRoleBinding{}
		get(g, client.ObjectKeyFromObject(foreign), crb)
		g.Expect(crb.Subjects).To(BeEmpty(), "the foreign ClusterRoleBinding is not rewritten")
	}).Should(Succeed())

	// The namespace stops being a tenant's: the source stage's RoleBinding goes.
	g.Eventually(func(g Gomega) {
		get(g, client.ObjectKeyFromObject(tn), tn)
		delete(tn.Labels, gitopsv1alpha1.LabelTenant)
		g.Expect(env.Client.Update(ctx, tn)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, roleKey, &rbacv1.RoleBinding{}))).To(BeTrue())
	}).Should(Succeed())

	// Cleanup leaves the foreign ClusterRoleBinding alone.
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(p), &gitopsv1alpha1.Platform{}))).To(BeTrue())
	}).Should(Succeed())
	get(g, client.ObjectKeyFromObject(foreign), &rbacv1.ClusterRoleBinding{})
}
