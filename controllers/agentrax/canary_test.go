package agentrax_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
)

// These scenarios run the AgentDeployment controller against the real Prometheus of canary_rig_test.go. They
// do not call t.Parallel: the fail-safe scenario stops the shared Prometheus.

const (
	v1 = "ghcr.io/org/agent:v1"
	v2 = "ghcr.io/org/agent:v2"
)

func canaryGone(g Gomega, ns string) {
	key := types.NamespacedName{Namespace: ns, Name: "bot-canary"}
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), key, &appsv1.Deployment{}))).To(BeTrue(), "canary Deployment deleted")
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), key, &corev1.Service{}))).To(BeTrue(), "canary Service deleted")
}

func TestCanaryHealthyPromotesThroughEveryStep(t *testing.T) {
	r := newRig(t, 40)
	// The Gateway holds the first canary weight, so the rollout waits at its first step while it is looked at
	// (otherwise a loaded machine can let all three steps pass between two polls).
	r.holdCanary.Store(true)
	r.startCanaryOfV2()
	// While the canary runs, its largest size (100 % of replicas.max 4) is charged on top of replicas.max.
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutInProgress))
		g.Expect(getLedger(g, r.ns)).To(ContainElement(HaveField("Replicas", int32(8))))
		dep := &appsv1.Deployment{}
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: "bot-canary"}, dep)).To(Succeed())
		g.Expect(dep.Spec.Template.Labels).To(HaveKeyWithValue(agentraxv1alpha1.LabelVariant, agentraxv1alpha1.VariantCanary))
		g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(v2))
	})
	r.holdCanary.Store(false)
	r.until(120*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.StableVersion).To(Equal(v2))
	})
	g := NewWithT(t)
	ad := r.get(g)
	g.Expect(ad.Status.Stage).To(BeEmpty())
	g.Expect(ad.Status.Phase).NotTo(Equal(agentraxv1alpha1.PhaseRolloutFailed))
	g.Expect(ad.Status.CanaryVersion).To(BeEmpty())
	g.Expect(rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy).Reason).To(Equal(rollout.ReasonPromoted))
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 50, 100, 0}), "every step applied once, then back to stable")
	g.Expect(r.canaryReplicaCounts()).To(Equal([]int32{1, 2, 4}), "canary replicas follow the weight (stable has 4)")
	stable := &appsv1.Deployment{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: "bot"}, stable)).To(Succeed())
	g.Expect(stable.Spec.Template.Spec.Containers[0].Image).To(Equal(v2))
	canaryGone(g, r.ns)
	route := r.route(g)
	g.Expect(route.Spec.Rules[0].BackendRefs).To(HaveLen(1))
	g.Expect(route.Spec.Rules[0].BackendRefs[0].Weight).To(Equal(ptr.To[int32](100)))
	g.Expect(route.Spec.Hostnames).To(HaveExactElements(BeEquivalentTo("bot.example.com")))
	g.Eventually(func(g Gomega) {
		g.Expect(getLedger(g, r.ns)).To(ContainElement(HaveField("Replicas", int32(4))), "canary charge released")
	}).Should(Succeed())
}

func TestCanaryLatencySpikeRollsBackBeforeFullWeight(t *testing.T) {
	r := newRig(t, 40)
	r.startCanaryOfV2()
	// A 600 ms latency spike mid-rollout: injected once the first pause passed, so the pause at 50 % sees only
	// spiked canary requests (a loaded machine cannot let that pause pass before Prometheus scraped the spike).
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryStepIndex).To(BeNumerically(">=", 2))
	})
	r.canary.Set(0.01, 0.6)
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(BeEmpty())
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
	})
	g := NewWithT(t)
	ad := r.get(g)
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 50, 0}), "rolled back before 100, stable back at 100")
	g.Expect(r.traffic.Weight()).To(BeZero())
	g.Expect(ad.Status.StableVersion).To(Equal(v1))
	g.Expect(ad.Status.AbortedVersion).To(Equal(v2))
	c := rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(rollout.ReasonP99LatencyExceeded))
	g.Expect(c.Message).To(MatchRegexp(`^p99 latency \d+ms over \d+s \(\d+ requests\) exceeds maxP99LatencyMs 500ms$`))
	canaryGone(g, r.ns)
	route := r.route(g)
	g.Expect(route.Spec.Rules[0].BackendRefs).To(HaveLen(1))
	g.Expect(route.Spec.Rules[0].BackendRefs[0].Weight).To(Equal(ptr.To[int32](100)))
	// The failed image is not retried, and its canary is no longer charged.
	g.Consistently(func(g Gomega) {
		g.Expect(r.get(g).Status.Stage).To(BeEmpty())
	}).WithTimeout(2 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getLedger(g, r.ns)).To(ContainElement(HaveField("Replicas", int32(4))))
	}).Should(Succeed())
}

func TestCanaryErrorSpikeRollsBack(t *testing.T) {
	r := newRig(t, 40)
	r.canary.Set(0.4, 0.08)
	r.startCanaryOfV2()
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(BeEmpty())
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
	})
	g := NewWithT(t)
	ad := r.get(g)
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 0}))
	expectPhaseMetric(g, r.ns, "bot", string(agentraxv1alpha1.PhaseRolloutFailed)) // AgentraxRolloutFailed fires
	c := rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy)
	g.Expect(c.Reason).To(Equal(rollout.ReasonErrorRateExceeded))
	g.Expect(c.Message).To(MatchRegexp(`^error rate \d+\.\d\d% over \d+s \(\d+ requests\) exceeds maxErrorRate 10\.00%$`))
	canaryGone(g, r.ns)
}

func TestCanaryPrometheusDownRollsBackAfterFailsafe(t *testing.T) {
	r := newRig(t, 40)
	r.startCanaryOfV2()
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryStepIndex).To(Equal(int32(1)))
		g.Expect(ad.Status.PauseStartedAt).NotTo(BeNil())
	})
	r.prom.Stop()
	stopped := time.Now()
	// The next canary test finds Prometheus stopped and starts it again; so does this one when it ends.
	t.Cleanup(func() { _ = r.prom.Start() })
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).NotTo(Equal(agentraxv1alpha1.StageProgressing))
	})
	g := NewWithT(t)
	g.Expect(time.Since(stopped)).To(BeNumerically(">=", testFailsafe), "not before the fail-safe timeout")
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(BeEmpty())
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
		g.Expect(ad.Status.PromUnreachableSince).To(BeNil())
	})
	ad := r.get(g)
	c := rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy)
	g.Expect(c.Reason).To(Equal(rollout.ReasonPrometheusDown))
	g.Expect(c.Message).To(ContainSubstring("connection refused"))
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 0}))
	canaryGone(g, r.ns)
}

func TestCanaryLowTrafficHoldsAsSampleInsufficient(t *testing.T) {
	// 2 requests/s in total: the canary's 25 % never reaches 20 requests within the 12 s extension cap.
	r := newRig(t, 2)
	r.startCanaryOfV2()
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		c := rolloutCondition(ad, agentraxv1alpha1.ConditionSampleInsufficient)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(rollout.ReasonHeldInconclusive))
	})
	NewWithT(t).Consistently(func(g Gomega) {
		ad := r.get(g)
		g.Expect(ad.Status.Stage).To(Equal(agentraxv1alpha1.StageProgressing), "neither rolled back nor promoted")
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutInProgress))
		g.Expect(ad.Status.CanaryStepIndex).To(Equal(int32(1)))
		g.Expect(rolloutCondition(ad, agentraxv1alpha1.ConditionSampleInsufficient).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(4 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	NewWithT(t).Expect(r.acceptedWeights()).To(Equal([]int32{0, 25}))
}

func TestCanaryManagerRestartResumesMidPause(t *testing.T) {
	r := newRig(t, 40)
	r.startCanaryOfV2()
	var before agentraxv1alpha1.AgentDeploymentStatus
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryStepIndex).To(Equal(int32(3)))
		g.Expect(ad.Status.PauseStartedAt).NotTo(BeNil())
		before = ad.Status
	})
	g := NewWithT(t)
	g.Expect(env.RestartManager()).To(Succeed())
	// The restarted manager picks the rollout up where the status says: same step, same pause start.
	r.until(30*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryStepIndex).To(BeNumerically(">=", 3))
		if ad.Status.CanaryStepIndex == 3 {
			g.Expect(ad.Status.PauseStartedAt).To(Equal(before.PauseStartedAt), "same pause start")
		}
		g.Expect(ad.Status.ObservedGeneration).To(Equal(ad.Generation))
	})
	r.until(120*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.StableVersion).To(Equal(v2))
	})
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 50, 100, 0}), "no step re-applied after the restart")
}

// A user-owned route: the operator edits only the weights of its stable and canary backendRefs and leaves
// everything else (hostnames, a header filter, another rule) as the user wrote it.
func TestCanaryUserRouteOnlyWeightsEdited(t *testing.T) {
	backend := func(name string, weight int32) gatewayv1.HTTPBackendRef {
		return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{
			Name: gatewayv1.ObjectName(name), Port: ptr.To[gatewayv1.PortNumber](8080)}, Weight: ptr.To(weight)}}
	}
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "public"}, Spec: gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: "edge"}}},
		Hostnames:       []gatewayv1.Hostname{"api.example.com"},
		Rules: []gatewayv1.HTTPRouteRule{
			{BackendRefs: []gatewayv1.HTTPBackendRef{backend("bot", 100), backend("bot-canary", 0)},
				Filters: []gatewayv1.HTTPRouteFilter{{Type: gatewayv1.HTTPRouteFilterRequestHeaderModifier,
					RequestHeaderModifier: &gatewayv1.HTTPHeaderFilter{Set: []gatewayv1.HTTPHeader{{Name: "X-Via", Value: "edge"}}}}}},
			{Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/docs")}}},
				BackendRefs: []gatewayv1.HTTPBackendRef{backend("docs", 1)}},
		},
	}}
	r := newRigWithRoute(t, 40, route)
	g := NewWithT(t)
	before := r.route(g)
	r.startCanaryOfV2()
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryWeight).To(Equal(int32(25)))
		g.Expect(r.route(g).Spec.Rules[0].BackendRefs[1].Weight).To(Equal(ptr.To[int32](25)))
	})
	r.until(120*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.StableVersion).To(Equal(v2))
	})
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 50, 100, 0}))
	after := r.route(g)
	g.Expect(after.Spec).To(Equal(before.Spec), "back at 100/0 the route is exactly as its owner wrote it")
	g.Expect(metav1.GetControllerOf(after)).To(BeNil(), "never adopted")
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: "bot"}, &gatewayv1.HTTPRoute{}))).
		To(BeTrue(), "no owned route is created in routeName mode")
	canaryGone(g, r.ns)
}
