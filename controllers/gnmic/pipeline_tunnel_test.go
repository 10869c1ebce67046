package gnmic_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// A Pipeline with a tunnel policy and no subscription never blocks the Cluster (the stand-in answers 400 to tunnel
// matches without any subscription, as gNMIc v0.47 does) and never feeds another Pipeline's output (gNMIc would
// give such a match every subscription it knows): its match is not sent at all.
func TestTunnelOnlyPipelineNeverBlocksTheCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	names := fleet(g, ns, 2)
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TunnelTargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leafs"},
		Spec: gnmicv1alpha1.TunnelTargetPolicySpec{Match: &gnmicv1alpha1.TunnelTargetMatch{Type: "GNMI_GNOI", ID: "^leaf-[0-9]+$"}}})).To(Succeed())
	c := cluster(g, ns, "tun", 1, servers)
	c.Spec.Image = "ghcr.io/openconfig/gnmic:0.47.0" // tunnel target policies need 0.47
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tunnel-only"},
		Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "tun", Enabled: true, TunnelTargetPolicyRefs: []string{"leafs"},
			Outputs: gnmicv1alpha1.PipelineOutputs{OutputRefs: []string{"prom"}}}})).To(Succeed())
	applied := func(g Gomega) {
		cond := clusterCondition(g, c, gnmicv1alpha1.ClusterConditionConfigApplied)
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonConfigurationApplied), cond.Message)
	}
	g.Eventually(func(g Gomega) {
		applied(g)
		g.Expect(servers[0].ApplyCount()).To(BeNumerically(">", 0))
		g.Expect(servers[0].Config().TunnelTargetMatches).To(BeEmpty())
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Another Pipeline with a subscription: its targets are collected, and still no match rides on its subscription.
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "tun"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		applied(g)
		g.Expect(servers[0].TargetNames()).To(Equal(names))
		g.Expect(servers[0].Config().TunnelTargetMatches).To(BeEmpty())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
