package olm

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

// canaryQueriesConfiguredPrometheus starts a canary of an agent routed through a Gateway and waits until its
// analysis queries the Prometheus configured through the Subscription. The test plays the Gateway controller
// (it accepts the agent's HTTPRoute); no Gateway implementation runs here.
func canaryQueriesConfiguredPrometheus(t *testing.T, tap *asinstalled.PrometheusTap) {
	t.Helper()
	g := NewWithT(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go acceptRoutes(ctx, "default")

	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "canary-probe"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{
			Image: "ghcr.io/org/probe:v1", Port: 8080, TenantRef: "alpha-quota",
			Replicas: agentraxv1alpha1.ReplicasSpec{Min: 1, Max: 1, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
			Rollout: &agentraxv1alpha1.RolloutSpec{
				Strategy: agentraxv1alpha1.StrategyCanary,
				Steps: []agentraxv1alpha1.RolloutStep{{SetWeight: ptr.To[int32](50)},
					{Pause: &agentraxv1alpha1.PauseStep{Duration: metav1.Duration{Duration: 10 * time.Minute}}},
					{SetWeight: ptr.To[int32](100)}},
				Rollback: &agentraxv1alpha1.RollbackSpec{MaxErrorRate: "5%", MaxP99LatencyMs: 500, MinRequestSample: 10},
				Traffic: &agentraxv1alpha1.TrafficSpec{Route: &agentraxv1alpha1.OwnedRouteSpec{
					ParentRefs: []agentraxv1alpha1.GatewayParentRef{{Name: "shared-gateway"}},
					Hostnames:  []string{"probe.example.com"},
				}},
			},
		},
	}
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	defer func() { _ = env.Client.Delete(context.Background(), ad) }()
	key := client.ObjectKeyFromObject(ad)
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, ad)).To(Succeed())
		g.Expect(ad.Status.StableVersion).To(Equal("ghcr.io/org/probe:v1"))
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	before := len(tap.Asked())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, ad)).To(Succeed())
		ad.Spec.Image = "ghcr.io/org/probe:v2"
		g.Expect(env.Client.Update(ctx, ad)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(tap.Asked()[before:]).To(ContainElement(And(HavePrefix("200 "), ContainSubstring(`canary-probe`))),
			"the canary analysis queried the Prometheus of QUARTET_PROMETHEUS_URL, which answered")
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), func() string {
		_ = env.Client.Get(ctx, key, ad)
		return "rollout: phase " + string(ad.Status.Phase) + ", stage " + string(ad.Status.Stage)
	})
}

// acceptRoutes plays a Gateway controller in namespace ns until ctx ends: every HTTPRoute generation is accepted.
func acceptRoutes(ctx context.Context, ns string) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		routes := &gatewayv1.HTTPRouteList{}
		if env.Client.List(ctx, routes, client.InNamespace(ns)) != nil {
			continue
		}
		for i := range routes.Items {
			_, _ = testenv.AcceptRoute(ctx, env.Client, &routes.Items[i])
		}
	}
}
