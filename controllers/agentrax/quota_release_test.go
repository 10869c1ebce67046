package agentrax_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// TestQuotaHeldUntilPodsGone: an agent whose deletion is stalled (the registry refuses to deregister it) keeps
// its pods — the garbage collector deletes a background-deleted owner's children only once the owner is gone —
// and those pods hold their GPUs, so its quota charge stays: a second agent that needs the room is refused. Once
// deregistration goes through, the real garbage collector and ReplicaSet controller remove the pods and the
// charge is released: the second agent is admitted.
func TestQuotaHeldUntilPodsGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 4, 20, 10))).To(Succeed())
	first := agentDeployment(ns, "first", "q", 2, 4, 1) // reserves 4 replicas × 1 GPU: the whole quota
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	podsOfFirst := func(g Gomega) []corev1.Pod {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns),
			client.MatchingLabels{agentraxv1alpha1.LabelName: "first"})).To(Succeed())
		return pods.Items
	}
	g.Eventually(func(g Gomega) {
		g.Expect(podsOfFirst(g)).To(HaveLen(2))
		got := getAgent(g, client.ObjectKeyFromObject(first))
		g.Expect(got.Finalizers).To(ContainElement(agentraxv1alpha1.Finalizer))
	}).WithTimeout(time.Minute).Should(Succeed())

	registrar.failDeregister.Store(true)
	t.Cleanup(func() { registrar.failDeregister.Store(false) })
	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	second := func() *agentraxv1alpha1.AgentDeployment { return agentDeployment(ns, "second", "q", 1, 2, 1) }
	// Longer than the usage delay and the settle grace, so a controller that released the charge would have.
	g.Consistently(func(g Gomega) {
		g.Expect(podsOfFirst(g)).NotTo(BeEmpty(), "the stalled agent's pods still run")
		err := env.Client.Create(ctx, second(), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the leaving agent's pods still run, its 4 GPUs stay charged: %v", err)
	}, 4*time.Second, 250*time.Millisecond).Should(Succeed())

	registrar.failDeregister.Store(false)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Create(ctx, second())).To(Succeed())
	}).WithTimeout(2 * time.Minute).Should(Succeed())
	g.Expect(podsOfFirst(g)).To(BeEmpty(), "admitted only once the first agent's pods were gone")
	g.Eventually(func(g Gomega) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), &agentraxv1alpha1.AgentDeployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "first agent: %v", err)
		g.Expect(phaseSeries(g, ns, "first")).To(BeEmpty(), "a deleted agent leaves no phase series")
	}).WithTimeout(time.Minute).Should(Succeed())
}
