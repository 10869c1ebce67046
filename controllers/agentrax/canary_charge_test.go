package agentrax_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// TestCanaryChargeFollowsTheStablesReplicas: a canary is sized against the stable's replicas, so an image change
// of an agent whose stable runs 2 pods (replicas 2..10, steps 50 % and 100 %) is charged 2 canary pods on top of
// replicas.max, not 100 % of replicas.max: the ledger holds 12, and a second agent of 8 still fits a quota of 20.
func TestCanaryChargeFollowsTheStablesReplicas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "bot", "q", 2, 10, 0)
	ad.Spec.Rollout = &agentraxv1alpha1.RolloutSpec{
		Strategy: agentraxv1alpha1.StrategyCanary,
		Steps: []agentraxv1alpha1.RolloutStep{{SetWeight: ptr.To[int32](50)}, {SetWeight: ptr.To[int32](100)},
			{Pause: &agentraxv1alpha1.PauseStep{}}},
		Rollback: &agentraxv1alpha1.RollbackSpec{MaxErrorRate: "5%", MaxP99LatencyMs: 500, MinRequestSample: 10},
		// The route does not exist, so the controller never starts the canary; the charge is admission's alone.
		Traffic: &agentraxv1alpha1.TrafficSpec{RouteName: "missing-route"},
	}
	ad.Spec.Rollout.Steps[2].Pause.Duration.Duration = time.Minute
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ad), got)).To(Succeed())
		g.Expect(got.Status.StableVersion).To(Equal(ad.Spec.Image))
		g.Expect(got.Status.CurrentReplicas).To(Equal(int32(2)))
	}).WithTimeout(60 * time.Second).Should(Succeed())

	g.Eventually(func() error {
		return updateAgent(ns, "bot", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Image = "ghcr.io/org/agent:v2" })
	}).Should(Succeed())
	g.Expect(getLedger(g, ns)).To(ConsistOf(And(HaveField("Name", "bot"), HaveField("Replicas", int32(12)))),
		"replicas.max 10 + 100 % of the stable's 2 pods")
	err := env.Client.Create(ctx, agentDeployment(ns, "other", "q", 1, 8, 0))
	g.Expect(err).NotTo(HaveOccurred(), "12 + 8 = 20 fits maxTotalReplicas 20")
}
