package agentrax_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// crashPod sends a running pod into CrashLoopBackOff (testenv.CrashLoopStage): it stops being ready.
func crashPod(g Gomega, p *corev1.Pod) {
	patch := client.MergeFrom(p.DeepCopy())
	p.Labels[testenv.CrashLoopLabel] = testenv.CrashLoopValue
	g.Expect(env.Client.Patch(context.Background(), p, patch)).To(Succeed())
}

// A registered agent stays registered while some of its pods still serve — a rolling update or a drain takes
// availability below replicas.min for a while, which is no reason to withdraw it from the registry (and to
// rediscover it moments later) — and is deregistered once none serves.
func TestRegisteredAgentStaysRegisteredWhileAnyPodServes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "steady-mcp", "q", 2, 2, 0)
	ad.Spec.MCP = &agentraxv1alpha1.MCPSpec{Expose: true}
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)
	name := ns + "/steady-mcp"
	g.Eventually(func(g Gomega) {
		g.Expect(getAgent(g, key).Status.Registered).To(BeTrue())
	}).WithTimeout(60 * time.Second).Should(Succeed())

	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{agentraxv1alpha1.LabelName: "steady-mcp"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(2))
	crashPod(g, &pods.Items[0])
	g.Eventually(func(g Gomega) {
		g.Expect(getAgent(g, key).Status.Phase).To(Equal(agentraxv1alpha1.PhasePending), "below replicas.min")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(registrar.deregistrations(name)).To(BeEmpty(), "one pod still serves: not deregistered")
		g.Expect(getAgent(g, key).Status.Registered).To(BeTrue())
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

	crashPod(g, &pods.Items[1])
	g.Eventually(func(g Gomega) {
		g.Expect(registrar.deregistrations(name)).NotTo(BeEmpty(), "no pod serves: deregistered")
		g.Expect(getAgent(g, key).Status.Registered).To(BeFalse())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
