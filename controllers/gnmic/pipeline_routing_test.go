package gnmic_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// A Pipeline without outputs shares its Targets with a Pipeline that has one: the collector must receive only the
// second Pipeline's subscription, routed to its output, and the first reports NoOutputs.
func TestPipelineWithoutOutputsIsNotCollected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	fleet(g, ns, 2)
	c := cluster(g, ns, "solo", 1, servers)
	c.Spec.Image = "ghcr.io/openconfig/gnmic:0.47.0"
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	// A second prometheus output without a listen address: gNMIc would put it on :9804 too.
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Output{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom2"},
		Spec: gnmicv1alpha1.OutputSpec{Type: gnmicv1alpha1.OutputPrometheus}})).To(Succeed())
	feeds := pipelineFor(ns, "feeds", "solo")
	feeds.Spec.Outputs.OutputRefs = []string{"prom", "prom2"}
	g.Expect(env.Client.Create(ctx, feeds)).To(Succeed())
	silent := pipelineFor(ns, "silent", "solo")
	silent.Spec.Outputs = gnmicv1alpha1.PipelineOutputs{}
	g.Expect(env.Client.Create(ctx, silent)).To(Succeed())

	g.Eventually(func(g Gomega) {
		held := servers[0].Config()
		g.Expect(held.Targets).To(HaveLen(2))
		g.Expect(held.Subscriptions).To(HaveLen(1))
		g.Expect(held.Subscriptions).To(HaveKey(ns + "/feeds/ifaces"))
		g.Expect(held.Subscriptions[ns+"/feeds/ifaces"].Outputs).To(Equal([]string{ns + "/prom", ns + "/prom2"}))
		g.Expect(held.Outputs[ns+"/prom"]["listen"]).To(Equal(":9804"))
		g.Expect(held.Outputs[ns+"/prom2"]["listen"]).To(Equal(":9805"))
	}).Should(Succeed())
	// One headless Service per prometheus output, on its own port, so every pod is scraped.
	g.Eventually(func(g Gomega) {
		for name, port := range map[string]int32{"gnmic-solo-prom": 9804, "gnmic-solo-prom2": 9805} {
			svc := &corev1.Service{}
			g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, svc)).To(Succeed())
			g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), name)
			g.Expect(svc.Spec.Ports).To(HaveLen(1))
			g.Expect(svc.Spec.Ports[0].Port).To(Equal(port), name)
		}
	}).Should(Succeed())
	g.Expect(servers[0].Unused()).To(BeEmpty(), "keys the collector would drop")
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(silent), silent)).To(Succeed())
		cond := meta.FindStatusCondition(silent.Status.Conditions, "Ready")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonNoOutputs))
	}).Should(Succeed())
}

// Below gNMIc 0.47 a collector drops tunnel target matches without a word: the Cluster says so and leaves them
// out; with a newer image they are pushed.
func TestClusterRefusesTunnelPoliciesTheCollectorCannotDecode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	fleet(g, ns, 1)
	c := cluster(g, ns, "old", 1, servers)
	c.Spec.Image = "ghcr.io/openconfig/gnmic:0.45.0"
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TunnelTargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leaves"},
		Spec: gnmicv1alpha1.TunnelTargetPolicySpec{Match: &gnmicv1alpha1.TunnelTargetMatch{Type: "srlinux", ID: "^leaf"}, Profile: "default"}})).To(Succeed())
	pl := pipelineFor(ns, "p", "old")
	pl.Spec.TunnelTargetPolicyRefs = []string{"leaves"}
	g.Expect(env.Client.Create(ctx, pl)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Status.CollectorVersion).To(Equal("0.45.0"))
		cond := meta.FindStatusCondition(c.Status.Conditions, gnmicv1alpha1.ClusterConditionFeaturesSupported)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonUnsupportedByCollector))
		g.Expect(cond.Message).To(ContainSubstring("TunnelTargetPolicy/leaves: tunnel target policies need gNMIc 0.47 or later"))
		g.Expect(servers[0].Config().Targets).To(HaveLen(1), "the rest of the Pipeline is still pushed")
		g.Expect(servers[0].Config().TunnelTargetMatches).To(BeEmpty())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pl), pl)).To(Succeed())
		cond := meta.FindStatusCondition(pl.Status.Conditions, "Ready")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonUnsupportedByCollector))
	}).Should(Succeed())

	g.Eventually(func(g Gomega) { // the controller's status writes move the resourceVersion
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.Spec.Image = "ghcr.io/openconfig/gnmic:0.47.0"
		g.Expect(env.Client.Update(ctx, c)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		// The new image rolls the StatefulSet through the real StatefulSet controller and the simulated kubelet.
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Status.CollectorVersion).To(Equal("0.47.0"))
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, gnmicv1alpha1.ClusterConditionFeaturesSupported)).To(BeTrue())
		g.Expect(servers[0].Config().TunnelTargetMatches).To(HaveKey(ns + "/leaves"))
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pl), pl)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(pl.Status.Conditions, "Ready")).To(BeTrue())
	}).Should(Succeed())
}
