package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// TestPlatformPharosIsASingleWriterBehindItsPolicy: the API server stores pharos's Deployment with the Recreate
// strategy (its state ConfigMap never has two writers) and its NetworkPolicy with the OTLP peers the render
// names; a pharos Deployment still rolling (as an older operator created it) is switched to Recreate.
func TestPlatformPharosIsASingleWriterBehindItsPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	key := types.NamespacedName{Namespace: ns, Name: platform.Name(gitopsv1alpha1.StagePharos)}

	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		get(g, key, d)
		g.Expect(d.Spec.Strategy).To(Equal(appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}))
		np := &networkingv1.NetworkPolicy{}
		get(g, key, np)
		g.Expect(np.Spec.Ingress).To(Equal(platform.NetworkPolicy(p, gitopsv1alpha1.StagePharos).Spec.Ingress))
	}).Should(Succeed())

	// An older operator's pharos rolled; the API server keeps the rollingUpdate parameters it defaulted, which
	// Recreate does not admit, so the controller replaces the whole strategy.
	g.Eventually(func(g Gomega) { // the Deployment controller's status writes move the resourceVersion
		d := &appsv1.Deployment{}
		get(g, key, d)
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(1))}}
		g.Expect(env.Client.Update(ctx, d)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		fresh := &appsv1.Deployment{}
		get(g, key, fresh)
		g.Expect(fresh.Spec.Strategy).To(Equal(appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}))
	}).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, p)).To(Succeed())
}
