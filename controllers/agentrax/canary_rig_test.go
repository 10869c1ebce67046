package agentrax_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
)

// The canary tests share one real Prometheus on a port chosen before the manager starts (--prometheus-url is a
// manager flag). It is started by the first canary test and restarted by any test that finds it stopped; the
// fail-safe test stops it, which is why the canary tests never run in parallel.
var lab struct {
	mu   sync.Mutex
	port int
	dir  string
	prom *promlab.Prometheus
}

// Test settings of the canary engine: a short fail-safe and a fast analysis loop.
const (
	testFailsafe         = 3 * time.Second
	testAnalysisInterval = time.Second
)

// canaryManagerOptions points the manager at the shared Prometheus.
func canaryManagerOptions(o *manager.Options) {
	lab.mu.Lock()
	defer lab.mu.Unlock()
	if lab.port == 0 {
		port, err := promlab.FreePort()
		if err != nil {
			panic(err)
		}
		lab.port = port
	}
	o.PrometheusURL = fmt.Sprintf("http://prometheus.monitoring.svc:%d", lab.port) // reached through the dial map
	o.PrometheusFailsafeTimeout = testFailsafe
	o.CanaryAnalysisInterval = testAnalysisInterval
}

// stopLab stops the shared Prometheus and removes its data, after every test ran.
func stopLab() {
	lab.mu.Lock()
	defer lab.mu.Unlock()
	if lab.prom != nil {
		lab.prom.Stop()
	}
	if lab.dir != "" {
		_ = os.RemoveAll(lab.dir)
	}
}

// sharedPrometheus returns the running shared Prometheus, starting it if needed.
func sharedPrometheus(t *testing.T) *promlab.Prometheus {
	t.Helper()
	bin := promlab.RequireBinary(t)
	lab.mu.Lock()
	defer lab.mu.Unlock()
	g := NewWithT(t)
	if lab.prom == nil {
		dir, err := os.MkdirTemp("", "agentrax-prometheus-")
		g.Expect(err).NotTo(HaveOccurred())
		lab.dir = dir
		lab.prom, err = promlab.NewPrometheus(bin, dir, lab.port)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(lab.prom.Start()).To(Succeed(), "starting prometheus")
	return lab.prom
}

// rig is one canary scenario: an agent whose stable and canary variants are HTTP servers scraped by the shared
// Prometheus, in the cluster-grade control plane (Deployments roll out through the real controllers and the
// simulated kubelet), and a stand-in Gateway controller (routes are accepted, and traffic follows the weights it
// accepted): no Gateway implementation runs here.
type rig struct {
	t       *testing.T
	ns      string
	ad      *agentraxv1alpha1.AgentDeployment
	prom    *promlab.Prometheus
	stable  *promlab.App
	canary  *promlab.App
	traffic *promlab.Traffic

	// routeName is the HTTPRoute that splits the agent's traffic.
	routeName string

	mu sync.Mutex
	// accepted lists the canary weights the Gateway accepted, in order, without repeats.
	accepted []int32
	// canaryReplicas lists the canary Deployment's replica counts seen, in order, without repeats.
	canaryReplicas []int32

	// holdCanary makes the stand-in Gateway leave routes that send traffic to the canary unaccepted (as a slow
	// Gateway would), so a test can look at the rollout while it waits at its first step.
	holdCanary atomic.Bool
	// refuseAll makes the stand-in Gateway accept no new route generation at all, as one whose allowedRoutes
	// exclude the namespace (or a parentRef with a typo) would.
	refuseAll atomic.Bool
}

// newRig creates the agent at v1 with strategy Canary (steps 25 % → pause 4s → 50 % → pause 4s → 100 % →
// pause 3s) and an owned route, and waits until v1 is stable; rps is the agent's request rate.
func newRig(t *testing.T, rps float64) *rig { return newRigWithRoute(t, rps, nil) }

// newRigWithRoute is newRig with a user-owned route: userRoute, created before the agent, is named in
// spec.rollout.traffic.routeName instead of the operator owning one.
func newRigWithRoute(t *testing.T, rps float64, userRoute *gatewayv1.HTTPRoute) *rig {
	g := NewWithT(t)
	ctx := context.Background()
	r := &rig{t: t, ns: newNamespace(t), prom: sharedPrometheus(t)}
	r.stable = promlab.StartApp(t, r.ns, "bot", agentraxv1alpha1.VariantStable)
	r.canary = promlab.StartApp(t, r.ns, "bot", agentraxv1alpha1.VariantCanary)
	r.stable.Set(0.01, 0.08)
	r.canary.Set(0.01, 0.08)
	g.Expect(r.prom.AddTargets(r.stable, r.canary)).To(Succeed())
	r.traffic = promlab.StartTraffic(rps, r.stable, r.canary)
	t.Cleanup(r.traffic.Stop)

	g.Expect(env.Client.Create(ctx, tenantQuota(r.ns, "q", 5, 0, 20, 10))).To(Succeed())
	if userRoute != nil {
		userRoute.Namespace = r.ns
		g.Expect(env.Client.Create(ctx, userRoute)).To(Succeed())
	}
	ad := agentDeployment(r.ns, "bot", "q", 4, 4, 0)
	pause := func(d time.Duration) agentraxv1alpha1.RolloutStep {
		return agentraxv1alpha1.RolloutStep{Pause: &agentraxv1alpha1.PauseStep{Duration: metav1.Duration{Duration: d}}}
	}
	weight := func(w int32) agentraxv1alpha1.RolloutStep { return agentraxv1alpha1.RolloutStep{SetWeight: ptr.To(w)} }
	ad.Spec.Rollout = &agentraxv1alpha1.RolloutSpec{
		Strategy: agentraxv1alpha1.StrategyCanary,
		Steps:    []agentraxv1alpha1.RolloutStep{weight(25), pause(4 * time.Second), weight(50), pause(4 * time.Second), weight(100), pause(3 * time.Second)},
		Rollback: &agentraxv1alpha1.RollbackSpec{MaxErrorRate: "10%", MaxP99LatencyMs: 500, MinRequestSample: 20},
		Traffic: &agentraxv1alpha1.TrafficSpec{Route: &agentraxv1alpha1.OwnedRouteSpec{
			ParentRefs: []agentraxv1alpha1.GatewayParentRef{{Name: "shared-gateway"}},
			Hostnames:  []string{"bot.example.com"},
			Matches:    []agentraxv1alpha1.RouteMatch{{Path: &agentraxv1alpha1.RoutePathMatch{Value: "/v1"}}},
		}},
	}
	if userRoute != nil {
		ad.Spec.Rollout.Traffic = &agentraxv1alpha1.TrafficSpec{RouteName: userRoute.Name}
	}
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	r.ad = ad
	r.routeName = ad.Name
	if userRoute != nil {
		r.routeName = userRoute.Name
	}

	clusterCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go r.playCluster(clusterCtx, done)
	t.Cleanup(func() {
		stop()
		<-done
		// A leftover agent would keep querying Prometheus; deleting it stops its rollout.
		_ = env.Client.Delete(context.Background(), ad)
		if t.Failed() {
			t.Logf("prometheus output:\n%s", r.prom.Output())
		}
	})
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.StableVersion).To(Equal("ghcr.io/org/agent:v1"))
		g.Expect(r.route(g).Status.Parents).NotTo(BeEmpty(), "the owned route exists and was accepted")
	})
	return r
}

// startCanaryOfV2 starts a canary of image v2.
func (r *rig) startCanaryOfV2() {
	r.t.Helper()
	NewWithT(r.t).Eventually(func(g Gomega) {
		ad := r.get(g)
		ad.Spec.Image = v2
		g.Expect(env.Client.Update(context.Background(), ad)).To(Succeed())
	}).Should(Succeed())
}

func (r *rig) get(g Gomega) *agentraxv1alpha1.AgentDeployment {
	ad := &agentraxv1alpha1.AgentDeployment{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(r.ad), ad)).To(Succeed())
	return ad
}

func (r *rig) route(g Gomega) *gatewayv1.HTTPRoute {
	route := &gatewayv1.HTTPRoute{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: r.routeName}, route)).To(Succeed())
	return route
}

// until polls the AgentDeployment until check passes.
func (r *rig) until(timeout time.Duration, check func(g Gomega, ad *agentraxv1alpha1.AgentDeployment)) {
	r.t.Helper()
	var last *agentraxv1alpha1.AgentDeployment
	NewWithT(r.t).Eventually(func(g Gomega) {
		last = r.get(g)
		check(g, last)
	}).WithTimeout(timeout).WithPolling(100*time.Millisecond).Should(Succeed(), func() string {
		if last == nil {
			return ""
		}
		return fmt.Sprintf("status %+v; accepted weights %v", last.Status, r.acceptedWeights())
	})
}

func (r *rig) acceptedWeights() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int32(nil), r.accepted...)
}

func (r *rig) canaryReplicaCounts() []int32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int32(nil), r.canaryReplicas...)
}

func appendChanged(list []int32, v int32) []int32 {
	if len(list) > 0 && list[len(list)-1] == v {
		return list
	}
	return append(list, v)
}

// playCluster plays the Gateway controller every 50 ms: it accepts each route generation and then sends traffic by
// its weights; it also records the canary replica counts the controller asked for.
func (r *rig) playCluster(ctx context.Context, done chan struct{}) {
	defer close(done)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		deps := &appsv1.DeploymentList{}
		if env.Client.List(ctx, deps, client.InNamespace(r.ns)) == nil {
			for i := range deps.Items {
				r.recordCanary(&deps.Items[i])
			}
		}
		routes := &gatewayv1.HTTPRouteList{}
		if env.Client.List(ctx, routes, client.InNamespace(r.ns)) == nil {
			for i := range routes.Items {
				r.accept(ctx, &routes.Items[i])
			}
		}
	}
}

// recordCanary notes every canary replica count the controller asks for. The Deployment controller and the
// simulated kubelet roll the Deployments out.
func (r *rig) recordCanary(dep *appsv1.Deployment) {
	n := ptr.Deref(dep.Spec.Replicas, 1)
	if dep.Name == "bot-canary" {
		r.mu.Lock()
		r.canaryReplicas = appendChanged(r.canaryReplicas, n)
		r.mu.Unlock()
	}
}

func (r *rig) accept(ctx context.Context, route *gatewayv1.HTTPRoute) {
	var canary int32
	for _, rule := range route.Spec.Rules {
		for _, b := range rule.BackendRefs {
			if b.Name == "bot-canary" {
				canary = ptr.Deref(b.Weight, 1)
			}
		}
	}
	if r.refuseAll.Load() || (canary > 0 && r.holdCanary.Load()) {
		return
	}
	if wrote, err := testenv.AcceptRoute(ctx, env.Client, route); !wrote || err != nil {
		return
	}
	r.traffic.Set(-1, canary)
	r.mu.Lock()
	r.accepted = appendChanged(r.accepted, canary)
	r.mu.Unlock()
}

func rolloutCondition(ad *agentraxv1alpha1.AgentDeployment, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(ad.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}
