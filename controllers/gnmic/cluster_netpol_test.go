package gnmic_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The collectors' REST API applies plans and returns device passwords (GET /api/v1/config): as stored by the API
// server (what a CNI enforces), the Cluster's policy admits its port only from the operator's pods and leaves
// every other port as open as before.
func TestClusterAPIAdmitsOnlyTheOperator(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := cluster(g, ns, "np", 1, collectors(t, 1))
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	np := &networkingv1.NetworkPolicy{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-np-api"}, np)
	}).Should(Succeed())
	g.Expect(np.OwnerReferences).To(ContainElement(HaveField("Name", "np")))
	sts := &appsv1.StatefulSet{}
	// The policy is written before the StatefulSet in the same reconcile: the StatefulSet may not exist yet.
	g.Eventually(func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-np"}, sts)
	}).Should(Succeed())
	g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(sts.Spec.Selector.MatchLabels), "selects exactly the collector pods")
	g.Expect(np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress))
	g.Expect(np.Spec.Ingress).To(HaveLen(2))

	rest := np.Spec.Ingress[0]
	g.Expect(rest.Ports).To(ConsistOf(networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(7890))}))
	g.Expect(rest.From).To(HaveLen(1))
	g.Expect(rest.From[0].PodSelector.MatchLabels).To(Equal(map[string]string{"control-plane": "controller-manager"}))
	g.Expect(rest.From[0].NamespaceSelector).NotTo(BeNil())
	g.Expect(rest.From[0].IPBlock).To(BeNil())

	others := np.Spec.Ingress[1]
	g.Expect(others.From).To(BeEmpty(), "every peer")
	g.Expect(others.Ports).To(ConsistOf(
		networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(1)), EndPort: ptr.To(int32(7889))},
		networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(7891)), EndPort: ptr.To(int32(65535))},
		networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolUDP)},
		networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolSCTP)},
	))

	// A hand edit that opens the API is repaired.
	np.Spec.Ingress[0].From = nil
	g.Expect(env.Client.Update(ctx, np)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-np-api"}, np)).To(Succeed())
		g.Expect(np.Spec.Ingress[0].From).To(HaveLen(1))
	}).Should(Succeed())
}
