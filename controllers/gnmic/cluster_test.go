package gnmic_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// collectors starts n collector test servers on loopback.
func collectors(t *testing.T, n int) []*gnmicserver.Server {
	t.Helper()
	var out []*gnmicserver.Server
	for range n {
		s, err := gnmicserver.Start("127.0.0.1:0")
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

// fleet creates a profile with credentials, a subscription, a prometheus output and n targets labelled role=core.
func fleet(g Gomega, ns string, n int) []string {
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
		StringData: map[string]string{"username": "admin", "password": "s3cret"}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"},
		Spec: gnmicv1alpha1.TargetProfileSpec{CredentialsRef: &gnmicv1alpha1.SecretReference{Name: "creds"}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ifaces"},
		Spec: gnmicv1alpha1.SubscriptionSpec{Paths: []string{"/interfaces/interface/state/counters"}, Mode: "STREAM/SAMPLE",
			SampleInterval: &metav1.Duration{Duration: 10 * time.Second}}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Output{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom"},
		Spec: gnmicv1alpha1.OutputSpec{Type: gnmicv1alpha1.OutputPrometheus, Config: &apiextensionsv1.JSON{Raw: []byte(`{"listen":":9804"}`)}}})).To(Succeed())
	var names []string
	for i := range n {
		name := fmt.Sprintf("r%03d", i)
		tg := target(ns, name, fmt.Sprintf("192.0.2.%d:57400", i%250+1), "default")
		tg.Labels = map[string]string{"role": "core"}
		g.Expect(env.Client.Create(ctx, tg)).To(Succeed())
		names = append(names, ns+"/"+name)
	}
	return names
}

// cluster returns a Cluster whose pod i is served by servers[i]: the operator's connections to the pods'
// in-cluster addresses are sent to them through the dial map. The stand-ins serve plain HTTP, so the Cluster opts
// out of TLS (spec.api.plainHTTP); the TLS tests set spec.api themselves.
func cluster(g Gomega, ns, name string, replicas int32, servers []*gnmicserver.Server) *gnmicv1alpha1.Cluster {
	g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, name, 0, servers))).To(Succeed())
	return &gnmicv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.45.0", Replicas: &replicas,
			API: &gnmicv1alpha1.ClusterAPI{PlainHTTP: true}},
	}
}

func pipelineFor(ns, name, clusterName string) *gnmicv1alpha1.GnmicPipeline {
	return &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gnmicv1alpha1.PipelineSpec{
		ClusterRef: clusterName, Enabled: true,
		TargetSelectors:  []metav1.LabelSelector{{MatchLabels: map[string]string{"role": "core"}}},
		SubscriptionRefs: []string{"ifaces"},
		Outputs:          gnmicv1alpha1.PipelineOutputs{OutputRefs: []string{"prom"}},
	}}
}

// placedPods reads each target's pod for a cluster from Target status.
func placedPods(g Gomega, ns, clusterName string) map[string]string {
	targets := &gnmicv1alpha1.TargetList{}
	g.Expect(env.Client.List(context.Background(), targets, client.InNamespace(ns))).To(Succeed())
	out := map[string]string{}
	for _, t := range targets.Items {
		if st, ok := t.Status.ClusterStates[clusterName]; ok {
			out[ns+"/"+t.Name] = st.Pod
		}
	}
	return out
}

// expectServersHoldPlacement checks that every server holds exactly the targets whose status names its pod, and
// that together they hold all of want.
func expectServersHoldPlacement(g Gomega, ns, clusterName string, servers []*gnmicserver.Server, want []string) {
	pods := placedPods(g, ns, clusterName)
	g.Expect(slices.Sorted(maps.Keys(pods))).To(Equal(want))
	var all []string
	for i, s := range servers {
		var expected []string
		for t, pod := range pods {
			if pod == fmt.Sprintf("gnmic-%s-%d", clusterName, i) {
				expected = append(expected, t)
			}
		}
		slices.Sort(expected)
		held := s.TargetNames()
		if len(expected) == 0 {
			g.Expect(held).To(BeEmpty(), "server %d", i)
		} else {
			g.Expect(held).To(Equal(expected), "server %d", i)
		}
		all = append(all, held...)
	}
	slices.Sort(all)
	g.Expect(all).To(Equal(want), "every target on exactly one collector")
}

func TestClusterPushesPlacedTargetsToCollectors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 3)
	names := fleet(g, ns, 30)
	c := cluster(g, ns, "core", 3, servers)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	// Owned resources: headless Service, base ConfigMap, restricted StatefulSet.
	sts := &appsv1.StatefulSet{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-core"}, sts)
	}).Should(Succeed())
	g.Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(sts.Spec.ServiceName).To(Equal("gnmic-core"))
	pod := sts.Spec.Template.Spec
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	g.Expect(*pod.Containers[0].SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(pod.Containers[0].SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(pod.Containers[0].Args).To(Equal([]string{"--config", "/etc/gnmic/config.yaml", "collector"}))
	headless := &corev1.Service{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-core"}, headless)).To(Succeed())
	g.Expect(headless.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-core-config"}, cm)).To(Succeed())
	g.Expect(cm.Data["config.yaml"]).To(And(ContainSubstring("api-server:"), ContainSubstring("address: :7890"), ContainSubstring("enable-metrics: true")))

	// Nothing is pushed before a Pipeline exists, but every pod gets its (empty) plan.
	g.Eventually(func() int { return servers[0].ApplyCount() + servers[1].ApplyCount() + servers[2].ApplyCount() }).Should(Equal(3))
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "core-telemetry", "core"))).To(Succeed())

	g.Eventually(func(g Gomega) { expectServersHoldPlacement(g, ns, "core", servers, names) }).Should(Succeed())
	// The payload is gNMIc's: subscription and output by ns/name. The profile's credentials are withheld: this
	// Cluster's API is plain HTTP (TestClusterPushesCredentialsOnlyOverTLS).
	held := servers[0].Config()
	for _, cfg := range held.Targets {
		g.Expect(cfg.Username).To(BeNil())
		g.Expect(cfg.Password).To(BeNil())
		g.Expect(cfg.Subscriptions).To(Equal([]string{ns + "/core-telemetry/ifaces"}))
		g.Expect(cfg.Outputs).To(Equal([]string{ns + "/prom"}))
	}
	g.Expect(held.Subscriptions[ns+"/core-telemetry/ifaces"].StreamMode).To(Equal("sample"))
	g.Expect(held.Outputs[ns+"/prom"]["type"]).To(Equal("prometheus"))
	promSvc := &corev1.Service{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-core-prom"}, promSvc)
	}).Should(Succeed())
	g.Expect(promSvc.Spec.Ports[0].Port).To(Equal(int32(9804)))
	// Headless: each collector pod holds a shard of the targets, so Prometheus must scrape every pod.
	g.Expect(promSvc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))

	// Health flows back: every Target reports running/READY from its collector, and summarises to READY.
	g.Eventually(func(g Gomega) {
		targets := &gnmicv1alpha1.TargetList{}
		g.Expect(env.Client.List(ctx, targets, client.InNamespace(ns))).To(Succeed())
		for _, tg := range targets.Items {
			st := tg.Status.ClusterStates["core"]
			g.Expect(st.State).To(Equal("running"), tg.Name)
			g.Expect(st.ConnectionState).To(Equal("READY"), tg.Name)
			g.Expect(st.Subscriptions).To(Equal(map[string]string{ns + "/core-telemetry/ifaces": "running"}))
			g.Expect(tg.Status.ConnectionState).To(Equal(gnmicv1alpha1.ConnectionStateReady))
			g.Expect(meta.IsStatusConditionTrue(tg.Status.Conditions, gnmicv1alpha1.TargetConditionReady)).To(BeTrue(), tg.Name)
		}
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Status.TargetsCount).To(Equal(int32(30)))
		g.Expect(c.Status.PipelinesCount).To(Equal(int32(1)))
		g.Expect(c.Status.SubscriptionsCount).To(Equal(int32(1)))
		g.Expect(c.Status.OutputsCount).To(Equal(int32(1)))
		g.Expect(c.Status.ReadyReplicas).To(Equal(int32(3)))
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, gnmicv1alpha1.ClusterConditionReady)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(c.Status.Conditions, gnmicv1alpha1.ClusterConditionCapacityExhausted)).To(BeTrue())
	}).Should(Succeed())

	// A failing device shows up in Target status.
	failing := names[0]
	for _, s := range servers {
		s.SetTargetState(failing, "failed", "TRANSIENT_FAILURE", "connection refused")
	}
	g.Eventually(func(g Gomega) {
		tg := &gnmicv1alpha1.Target{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: strings.TrimPrefix(failing, ns+"/")}, tg)).To(Succeed())
		g.Expect(tg.Status.ClusterStates["core"].FailedReason).To(Equal("connection refused"))
		g.Expect(tg.Status.ConnectionState).To(Equal(gnmicv1alpha1.ConnectionStateDegraded))
		ready := meta.FindStatusCondition(tg.Status.Conditions, gnmicv1alpha1.TargetConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(gnmicv1alpha1.ReasonTargetDegraded))
		g.Expect(ready.Message).To(ContainSubstring("Cluster core: failed"))
		g.Expect(ready.Message).To(ContainSubstring("connection refused"))
	}).Should(Succeed())

	// Steady state: no more applies.
	counts := func() []int { return []int{servers[0].ApplyCount(), servers[1].ApplyCount(), servers[2].ApplyCount()} }
	settled := counts()
	g.Consistently(counts).WithTimeout(2 * time.Second).Should(Equal(settled))

	// A dropped stream makes the operator re-send that pod's plan (the collector may have restarted).
	servers[1].DropStreams()
	g.Eventually(func() int { return servers[1].ApplyCount() }).Should(Equal(settled[1] + 1))
	g.Expect(servers[0].ApplyCount()).To(Equal(settled[0]))

	// Disabling the Pipeline empties every collector and clears Target status.
	pl := &gnmicv1alpha1.GnmicPipeline{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "core-telemetry"}, pl)).To(Succeed())
	g.Expect(env.Client.Delete(ctx, pl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for i, s := range servers {
			g.Expect(s.TargetNames()).To(BeEmpty(), "server %d", i)
			g.Expect(s.Config().Subscriptions).To(BeEmpty())
		}
		g.Expect(placedPods(g, ns, "core")).To(BeEmpty())
	}).Should(Succeed())
}

func TestClusterScaleOutRebalancesWithMinimalMoves(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 3)
	names := fleet(g, ns, 60)
	c := cluster(g, ns, "edge", 2, servers)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "edge"))).To(Succeed())
	g.Eventually(func(g Gomega) { expectServersHoldPlacement(g, ns, "edge", servers[:2], names) }).Should(Succeed())
	g.Expect(servers[2].ApplyCount()).To(BeZero(), "pod 2 does not exist yet")
	before := placedPods(g, ns, "edge")

	// Scale through the scale subresource, as kubectl scale or an autoscaler would.
	// The controller writes the Cluster's status meanwhile, so a conflict is retried, as kubectl scale would be.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale := &autoscalingv1.Scale{}
		if err := env.Client.SubResource("scale").Get(ctx, c, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = 3
		return env.Client.SubResource("scale").Update(ctx, c, client.WithSubResourceBody(scale))
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		expectServersHoldPlacement(g, ns, "edge", servers, names)
		g.Expect(servers[2].TargetNames()).NotTo(BeEmpty())
	}).Should(Succeed())
	after := placedPods(g, ns, "edge")
	moved := 0
	for tg, pod := range after {
		if before[tg] != pod {
			moved++
			g.Expect(pod).To(Equal("gnmic-edge-2"), "targets only move to the new pod")
		}
	}
	g.Expect(moved).To(BeNumerically("<=", 60/3+3), "about 1/(N+1) of the targets move")
	// Two-phase: the new pod's first plan already had the moved targets, and the old pods dropped them before.
	applies := servers[2].Applies()
	targetCounts := make([]int, len(applies))
	for i, a := range applies {
		targetCounts[i] = len(a.Targets)
	}
	g.Expect(applies).To(HaveLen(2), "targets per apply to the new pod: %v", targetCounts)
	g.Expect(applies[0].Targets).To(BeEmpty(), "phase one: the new pod gets no target before the old pods let go")
	g.Expect(applies[1].Targets).To(HaveLen(moved))

	// Scale in: pod 2 is drained (sent an empty plan) before the StatefulSet shrinks.
	// A merge patch of the spec alone: the controller writes the Cluster's status meanwhile.
	g.Expect(env.Client.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(servers[2].TargetNames()).To(BeEmpty())
		expectServersHoldPlacement(g, ns, "edge", servers, names)
		sts := &appsv1.StatefulSet{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-edge"}, sts)).To(Succeed())
		g.Expect(*sts.Spec.Replicas).To(Equal(int32(2)))
	}).Should(Succeed())
}

func TestClusterCapacityExhaustedAndPipelineStatus(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	names := fleet(g, ns, 5)
	c := cluster(g, ns, "small", 1, servers)
	c.Spec.TargetDistribution = &gnmicv1alpha1.TargetDistribution{PodCapacity: ptr.To(int32(3))}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	pl := pipelineFor(ns, "p", "small")
	pl.Spec.TargetRefs = []string{"missing"}
	g.Expect(env.Client.Create(ctx, pl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Status.TargetsCount).To(Equal(int32(3)))
		g.Expect(c.Status.UnassignedTargets).To(Equal(int32(2)))
		g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, gnmicv1alpha1.ClusterConditionCapacityExhausted)).To(BeTrue())
		g.Expect(servers[0].TargetNames()).To(HaveLen(3))
	}).Should(Succeed())
	g.Expect(names).To(HaveLen(5))
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pl), pl)).To(Succeed())
		g.Expect(pl.Status.TargetsCount).To(Equal(int32(5)))
		g.Expect(pl.Status.SubscriptionsCount).To(Equal(int32(1)))
		g.Expect(pl.Status.OutputsCount).To(Equal(int32(1)))
		g.Expect(pl.Status.Status).To(Equal(gnmicv1alpha1.PipelineStatusIncomplete))
		cond := meta.FindStatusCondition(pl.Status.Conditions, gnmicv1alpha1.PipelineConditionResourcesResolved)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonMissingResources))
		g.Expect(cond.Message).To(ContainSubstring("Target/missing"))
	}).Should(Succeed())

	// A Pipeline naming a Cluster that does not exist is Incomplete with ClusterNotFound.
	orphan := pipelineFor(ns, "orphan", "nowhere")
	g.Expect(env.Client.Create(ctx, orphan)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), orphan)).To(Succeed())
		cond := meta.FindStatusCondition(orphan.Status.Conditions, "Ready")
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonClusterNotFound))
	}).Should(Succeed())
}

func TestClusterWaitsForReadyPodsAndSurvivesCollectorFaults(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	names := fleet(g, ns, 3)
	servers[0].SetFault(gnmicserver.Fault{Status: 503})
	// Failure injection: a ResourceQuota of zero pods keeps the StatefulSet controller from creating the pod.
	noPods := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	g.Expect(env.Client.Create(ctx, noPods)).To(Succeed())
	c := cluster(g, ns, "flaky", 1, servers)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "flaky"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		cond := meta.FindStatusCondition(c.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonWaitingForPods))
	}).Should(Succeed())
	g.Expect(env.Client.Delete(ctx, noPods)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		cond := meta.FindStatusCondition(c.Status.Conditions, gnmicv1alpha1.ClusterConditionConfigApplied)
		g.Expect(cond.Reason).To(Equal(gnmicv1alpha1.ReasonConfigurationFailed))
		g.Expect(cond.Message).To(ContainSubstring("HTTP 503"))
	}).Should(Succeed())
	servers[0].SetFault(gnmicserver.Fault{})
	g.Eventually(servers[0].TargetNames).WithTimeout(60 * time.Second).Should(Equal(names))
}

func TestCollectorKindWebhooks(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	for name, tc := range map[string]struct {
		obj  client.Object
		want []string
	}{
		"cluster gnmi port equals rest": {&gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec: gnmicv1alpha1.ClusterSpec{Image: "gnmic", API: &gnmicv1alpha1.ClusterAPI{GNMIPort: 7890}}},
			[]string{"spec.api.gnmiPort", "differ from restPort"}},
		"cluster plainHTTP with tls": {&gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec: gnmicv1alpha1.ClusterSpec{Image: "gnmic", API: &gnmicv1alpha1.ClusterAPI{PlainHTTP: true, TLS: &gnmicv1alpha1.ClusterTLS{}}}},
			[]string{"spec.api.plainHTTP", "spec.api.tls must be unset"}},
		"cluster tls with a bundle": {&gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"},
			Spec: gnmicv1alpha1.ClusterSpec{Image: "gnmic", ClientTLS: &gnmicv1alpha1.ClusterTLS{BundleRef: "ca"}}},
			[]string{"spec.clientTLS.bundleRef"}},
		"subscription sample interval on on_change": {&gnmicv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
			Spec: gnmicv1alpha1.SubscriptionSpec{Paths: []string{"/a"}, Mode: "STREAM/ON_CHANGE", SampleInterval: &metav1.Duration{Duration: time.Second}}},
			[]string{"spec.sampleInterval"}},
		"output ref on prometheus": {&gnmicv1alpha1.Output{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "o"},
			Spec: gnmicv1alpha1.OutputSpec{Type: "prometheus", ServiceRef: &gnmicv1alpha1.OutputServiceRef{Name: "x", Port: "1"}}},
			[]string{"spec.serviceRef", "not prometheus"}},
		"pipeline bad selector": {&gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "c", TargetSelectors: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}}},
			[]string{"spec.targetSelectors[0]"}},
		"tunnel policy bad regex": {&gnmicv1alpha1.TunnelTargetPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "t"},
			Spec: gnmicv1alpha1.TunnelTargetPolicySpec{Match: &gnmicv1alpha1.TunnelTargetMatch{ID: "(["}}},
			[]string{"spec.match.id"}},
		"processor type": {&gnmicv1alpha1.Processor{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: gnmicv1alpha1.ProcessorSpec{Type: "event-"}}, []string{"spec.type"}},
		"input type": {&gnmicv1alpha1.Input{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "i"},
			Spec: gnmicv1alpha1.InputSpec{Type: "file"}}, []string{"spec.type"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, tc.obj)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}
	// Defaults: replicas 1, restPort 7890, subscription mode STREAM.
	g := NewWithT(t)
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "gnmic", API: &gnmicv1alpha1.ClusterAPI{}}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Expect(*c.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(c.Spec.API.RestPort).To(Equal(int32(7890)))
	s := &gnmicv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"},
		Spec: gnmicv1alpha1.SubscriptionSpec{Paths: []string{"/a"}}}
	g.Expect(env.Client.Create(ctx, s)).To(Succeed())
	g.Expect(s.Spec.Mode).To(Equal(gnmicv1alpha1.SubscriptionModeStream))
}
