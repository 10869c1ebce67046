package gitops_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// TestPlatformGetsAServiceMonitorInItsNamespace: OpenShift's user-workload monitoring ignores
// `namespaceSelector: any`, so the stages of a Platform outside the operator's namespace are scraped only by a
// ServiceMonitor in the Platform's own namespace. The Platform writes one, owned by it, that selects every stage's
// Service by its labels and names the metrics port the Services carry.
func TestPlatformGetsAServiceMonitorInItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := "katastroma-" + suffix()
	g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	p := &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	sm := &monitoringv1.ServiceMonitor{}
	g.Eventually(func(g Gomega) {
		get(g, types.NamespacedName{Namespace: ns, Name: platform.ServiceMonitorName}, sm)
	}).Should(Succeed())
	g.Expect(sm.OwnerReferences).To(ContainElement(HaveField("Name", "main")))
	g.Expect(sm.Spec.NamespaceSelector.Any).To(BeFalse(), "user-workload monitoring ignores any: true")
	g.Expect(sm.Spec.NamespaceSelector.MatchNames).To(BeEmpty(), "its own namespace only")
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sm.Spec.Endpoints).To(HaveLen(1))
	for _, stage := range platform.Stages {
		svc := &corev1.Service{}
		get(g, types.NamespacedName{Namespace: ns, Name: platform.Name(stage)}, svc)
		g.Expect(selector.Matches(labels.Set(svc.Labels))).To(BeTrue(), "the monitor selects %s's Service", stage)
		g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Name", sm.Spec.Endpoints[0].Port)), stage)
	}
}
