package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gitops"
)

// TestTenantDashboardFollowsTheFirstNamespace: the Tenant controller writes one sidecar dashboard ConfigMap per
// tenant, owned by the Tenant, in its first namespace; when the spec puts another namespace first, the dashboard
// moves there and leaves the old one (one ConfigMap, so Grafana sees one dashboard per uid).
func TestTenantDashboardFollowsTheFirstNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	name := "dash-" + suffix()
	first, second := name+"-a", name+"-b"
	g.Expect(env.Client.Create(ctx, newTenant(name, first, second))).To(Succeed())
	dashboardIn := func(g Gomega, ns string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		get(g, types.NamespacedName{Namespace: ns, Name: gitops.DashboardConfigMapName}, cm)
		return cm
	}
	absentFrom := func(g Gomega, ns string) {
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: gitops.DashboardConfigMapName}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a dashboard in %s", ns)
	}
	g.Eventually(func(g Gomega) {
		tn := readyTenant(g, name)
		cm := dashboardIn(g, first)
		g.Expect(cm.Labels).To(HaveKeyWithValue("grafana_dashboard", "1"))
		g.Expect(cm.Labels).To(HaveKeyWithValue(gitopsv1alpha1.LabelTenant, name))
		g.Expect(cm.Data).To(Equal(gitops.TenantDashboard(name, first).Data))
		g.Expect(metav1.GetControllerOf(cm)).To(HaveField("UID", tn.UID))
		absentFrom(g, second)
	}).Should(Succeed())

	g.Eventually(func(g Gomega) {
		tn := &gitopsv1alpha1.Tenant{}
		get(g, types.NamespacedName{Name: name}, tn)
		tn.Spec.Namespaces = []string{second, first}
		g.Expect(env.Client.Update(ctx, tn)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		readyTenant(g, name)
		g.Expect(dashboardIn(g, second).Data).To(Equal(gitops.TenantDashboard(name, second).Data))
		absentFrom(g, first)
	}).Should(Succeed())

	tn := &gitopsv1alpha1.Tenant{}
	get(g, types.NamespacedName{Name: name}, tn)
	g.Expect(env.Client.Delete(ctx, tn)).To(Succeed())
}
