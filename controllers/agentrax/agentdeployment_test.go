package agentrax_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// The seed's AgentDeployment asks for 1 GPU × replicas.max 10 = 10 GPUs; the seed's TenantQuota allows 8. Both
// pass schema validation as written; admission refuses the agent naming the quota, the dimension and the
// numbers, and admits it once maxGPUs is 10.
func TestSeedObjects(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	g.Expect(env.Client.Create(ctx, readFixture(t, "seed_tenantquota.yaml", ns))).To(Succeed())
	err := env.Client.Create(ctx, readFixture(t, "seed_agentdeployment.yaml", ns))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.Expect(err.Error()).To(And(
		ContainSubstring(`TenantQuota "alpha-quota" maxGPUs`),
		ContainSubstring("spec.resources.limits[nvidia.com/gpu]"),
		ContainSubstring("1 nvidia.com/gpu × 10 replicas"),
		ContainSubstring("= 10 > 8")))

	tq := getQuota(g, ns, "alpha-quota")
	tq.Spec.MaxGPUs = 10
	g.Expect(env.Client.Update(ctx, tq)).To(Succeed())
	g.Expect(env.Client.Create(ctx, readFixture(t, "seed_agentdeployment.yaml", ns))).To(Succeed())

	ad := &agentraxv1alpha1.AgentDeployment{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "my-agent"}, ad)).To(Succeed())
	g.Expect(ad.Spec.Rollout.Steps[1].Pause.Duration.Duration).To(Equal(2 * time.Minute))
	g.Eventually(func(g Gomega) {
		tq := getQuota(g, ns, "alpha-quota")
		g.Expect(tq.Status.UsedAgents).To(Equal(int32(1)))
		g.Expect(tq.Status.UsedGPUs).To(Equal(int64(10)))
		g.Expect(tq.Status.UsedTotalReplicas).To(Equal(int32(10)))
		g.Expect(meta.IsStatusConditionFalse(tq.Status.Conditions, agentraxv1alpha1.ConditionOverQuota)).To(BeTrue())
	}).Should(Succeed())
}

func TestDefaultsAreApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "defaults", "q", 1, 2, 0)
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	g.Expect(ad.Spec.Port).To(Equal(int32(8080)))
	g.Expect(ad.Spec.Rollout).NotTo(BeNil())
	g.Expect(ad.Spec.Rollout.Strategy).To(Equal(agentraxv1alpha1.StrategyRecreate))
}

func TestValidationThroughTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())

	ad := agentDeployment(ns, "bad", "q", 3, 2, 0)
	ad.Spec.Rollout = &agentraxv1alpha1.RolloutSpec{Strategy: agentraxv1alpha1.StrategyCanary,
		Steps: []agentraxv1alpha1.RolloutStep{{SetWeight: ptr.To[int32](50)}}}
	err := env.Client.Create(ctx, ad)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring("spec.replicas.min"), ContainSubstring("spec.rollout.steps"),
		ContainSubstring("spec.rollout.rollback")))

	err = env.Client.Create(ctx, agentDeployment(ns, "no-quota", "missing", 1, 1, 0))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.Expect(err.Error()).To(And(ContainSubstring("spec.tenantRef"), ContainSubstring("TenantQuota "+ns+"/missing")))
}

func TestChildrenAndSelfHealing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 8, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "agent", "q", 2, 4, 1)
	ad.Spec.MCP = &agentraxv1alpha1.MCPSpec{Expose: true, Tools: []string{"search"}}
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)

	g.Eventually(func(g Gomega) {
		dep := &appsv1.Deployment{}
		g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
		g.Expect(dep.Labels).To(HaveKeyWithValue("agentrax.io/agent", "true"))
		g.Expect(dep.Spec.Template.Labels).To(And(HaveKeyWithValue("agentrax.io/agent", "true"),
			HaveKeyWithValue("agentrax.io/variant", "stable"), HaveKeyWithValue("app.kubernetes.io/name", "agent")))
		g.Expect(*dep.Spec.Replicas).To(Equal(int32(2)), "created with replicas.min")
		c := dep.Spec.Template.Spec.Containers[0]
		g.Expect(c.Image).To(Equal("ghcr.io/org/agent:v1"))
		g.Expect(c.Ports[0].ContainerPort).To(Equal(int32(8080)))
		g.Expect(c.Args).To(Equal([]string{"--serve"}))
		g.Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceName("nvidia.com/gpu")))
		g.Expect(dep.OwnerReferences).To(BeEmpty(),
			"no garbage-collector dependent: finalize deletes it only after the agent is deregistered")

		svc := &corev1.Service{}
		g.Expect(env.Client.Get(ctx, key, svc)).To(Succeed())
		g.Expect(svc.Spec.Selector).To(Equal(map[string]string{"app.kubernetes.io/name": "agent", "agentrax.io/variant": "stable"}))
		g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(8080)))

		pm := &monitoringv1.PodMonitor{}
		g.Expect(env.Client.Get(ctx, key, pm)).To(Succeed())
		g.Expect(pm.Spec.Selector.MatchLabels).NotTo(HaveKey("agentrax.io/variant"), "both variants are scraped")
		g.Expect(pm.Spec.PodTargetLabels).To(ContainElement("agentrax.io/variant"))

		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		g.Expect(env.Client.Get(ctx, key, hpa)).To(Succeed())
		g.Expect(*hpa.Spec.MinReplicas).To(Equal(int32(2)))
		g.Expect(hpa.Spec.MaxReplicas).To(Equal(int32(4)))
		g.Expect(hpa.Spec.Metrics[0].External.Metric.Name).To(Equal("agentrax_queue_depth"))
		g.Expect(*hpa.Spec.Behavior.ScaleUp.StabilizationWindowSeconds).To(Equal(int32(60)))
		g.Expect(hpa.Spec.Behavior.ScaleUp.Policies).To(ConsistOf(autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 60}))
		g.Expect(*hpa.Spec.Behavior.ScaleDown.StabilizationWindowSeconds).To(Equal(int32(300)))
		g.Expect(hpa.Spec.Behavior.ScaleDown.Policies).To(ConsistOf(autoscalingv2.HPAScalingPolicy{Type: autoscalingv2.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}))

		got := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Finalizers).To(ContainElement(agentraxv1alpha1.Finalizer))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		// The simulated kubelet may already have made the pods Ready: Pending and Running are both right here, as
		// long as Ready agrees with the phase.
		g.Expect(got.Status.Phase).To(BeElementOf(agentraxv1alpha1.PhasePending, agentraxv1alpha1.PhaseRunning))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, agentraxv1alpha1.ConditionReady)).To(
			Equal(got.Status.Phase == agentraxv1alpha1.PhaseRunning))
		g.Expect(got.Status.StableVersion).To(Equal("ghcr.io/org/agent:v1"))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, agentraxv1alpha1.ConditionReconciled)).To(BeTrue())
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, agentraxv1alpha1.ConditionQuotaLimited)).To(BeTrue())
	}).Should(Succeed())

	// Self-healing: every child deleted out of band comes back.
	for name, obj := range map[string]client.Object{
		"Deployment": &appsv1.Deployment{}, "Service": &corev1.Service{},
		"HorizontalPodAutoscaler": &autoscalingv2.HorizontalPodAutoscaler{}, "PodMonitor": &monitoringv1.PodMonitor{},
	} {
		t.Run("recreates the "+name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(env.Client.Get(ctx, key, obj)).To(Succeed())
			uid := obj.GetUID()
			g.Expect(env.Client.Delete(ctx, obj)).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(env.Client.Get(ctx, key, obj)).To(Succeed())
				g.Expect(obj.GetUID()).NotTo(Equal(uid))
				g.Expect(obj.GetLabels()).To(HaveKeyWithValue("agentrax.io/agent", "true"))
			}).Should(Succeed())
		})
	}

	// Once the Deployment controller reports its pods available (the simulated kubelet runs them), the agent runs
	// and is registered.
	g.Eventually(func(g Gomega) {
		got := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning))
		g.Expect(got.Status.CurrentReplicas).To(Equal(int32(2)))
		g.Expect(got.Status.Registered).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, agentraxv1alpha1.ConditionReady)).To(BeTrue())
	}).Should(Succeed())
}

// The HPA owns Deployment.spec.replicas once the Deployment exists: reconciles never write it back.
func TestHPAIsNeverFought(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "scaled", "q", 2, 8, 0)
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)
	dep := &appsv1.Deployment{}
	g.Eventually(func() error { return env.Client.Get(ctx, key, dep) }).Should(Succeed())

	// The HPA scales to 7 (the Deployment controller's status writes move the resourceVersion meanwhile).
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
		dep.Spec.Replicas = ptr.To[int32](7)
		g.Expect(env.Client.Update(ctx, dep)).To(Succeed())
	}).Should(Succeed())

	// A spec change makes the controller rewrite the Deployment (new image) ...
	g.Expect(updateAgent(ns, "scaled", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Image = "ghcr.io/org/agent:v2" })).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
		g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("ghcr.io/org/agent:v2"))
		got := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).Should(Succeed())
	// ... but leaves the HPA's replica count alone.
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
		g.Expect(*dep.Spec.Replicas).To(Equal(int32(7)))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// A settled agent and quota are not written again when nothing changes.
func TestSteadyStateMakesNoWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 4, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "steady", "q", 1, 3, 1)
	ad.Spec.Env = append(ad.Spec.Env, corev1.EnvVar{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}})
	// Probes as a user writes them, without the fields the API server defaults.
	ad.Spec.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
		Path: "/healthz", Port: intstr.FromString("http")}}}
	ad.Spec.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{
		Port: intstr.FromString("http")}}, FailureThreshold: 60}
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)
	objs := map[string]client.Object{
		"Deployment": &appsv1.Deployment{}, "Service": &corev1.Service{},
		"HorizontalPodAutoscaler": &autoscalingv2.HorizontalPodAutoscaler{}, "PodMonitor": &monitoringv1.PodMonitor{},
		"AgentDeployment": &agentraxv1alpha1.AgentDeployment{},
	}
	g.Eventually(func(g Gomega) {
		for _, o := range objs {
			g.Expect(env.Client.Get(ctx, key, o)).To(Succeed())
		}
		tq := getQuota(g, ns, "q")
		g.Expect(tq.Status.UsedAgents).To(Equal(int32(1)))
		g.Expect(objs["AgentDeployment"].(*agentraxv1alpha1.AgentDeployment).Status.ObservedGeneration).NotTo(BeZero())
	}).Should(Succeed())
	versions := func(g Gomega) map[string]string {
		out := map[string]string{}
		for name, o := range objs {
			g.Expect(env.Client.Get(ctx, key, o)).To(Succeed())
			out[name] = o.GetResourceVersion()
		}
		out["TenantQuota"] = getQuota(g, ns, "q").ResourceVersion
		return out
	}
	c := objs["Deployment"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0]
	g.Expect(c.ReadinessProbe).NotTo(BeNil(), "the agent's readiness probe reaches its pods")
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.StartupProbe).NotTo(BeNil(), "the agent's startup probe reaches its pods")
	g.Expect(c.StartupProbe.FailureThreshold).To(Equal(int32(60)))
	// Let the first passes settle, then poke the controllers with an annotation (no generation change).
	var settled map[string]string
	g.Eventually(func(g Gomega) {
		before := versions(g)
		time.Sleep(time.Second) // observation window, not synchronisation
		g.Expect(versions(g)).To(Equal(before))
		settled = before
	}).WithTimeout(30 * time.Second).Should(Succeed())

	got := &agentraxv1alpha1.AgentDeployment{}
	g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{"poke": "1"}
	g.Expect(env.Client.Patch(ctx, got, patch)).To(Succeed())
	settled["AgentDeployment"] = got.ResourceVersion
	g.Consistently(func(g Gomega) {
		g.Expect(versions(g)).To(Equal(settled))
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
}

// Lowering the quota caps the HPAs (QuotaLimited) and sets OverQuota, but deletes nothing.
func TestQuotaLimitedCapping(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	a := agentDeployment(ns, "a", "q", 2, 10, 0)
	b := agentDeployment(ns, "b", "q", 2, 10, 0)
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())

	expectCap := func(name string, maxReplicas int32, status metav1.ConditionStatus, reason string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			key := types.NamespacedName{Namespace: ns, Name: name}
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			g.Expect(env.Client.Get(ctx, key, hpa)).To(Succeed())
			g.Expect(hpa.Spec.MaxReplicas).To(Equal(maxReplicas))
			ad := &agentraxv1alpha1.AgentDeployment{}
			g.Expect(env.Client.Get(ctx, key, ad)).To(Succeed())
			c := meta.FindStatusCondition(ad.Status.Conditions, agentraxv1alpha1.ConditionQuotaLimited)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(status))
			g.Expect(c.Reason).To(Equal(reason))
		}).Should(Succeed())
	}
	expectCap("a", 10, metav1.ConditionFalse, agentraxv1alpha1.ReasonWithinQuota)

	setTotal := func(total, perAgent int32) {
		tq := getQuota(g, ns, "q")
		tq.Spec.MaxTotalReplicas, tq.Spec.MaxReplicasPerAgent = total, perAgent
		g.Expect(env.Client.Update(ctx, tq)).To(Succeed())
	}
	setTotal(14, 10) // headroom 14 − 10 = 4 ≥ min 2
	expectCap("a", 4, metav1.ConditionTrue, agentraxv1alpha1.ReasonMaxReplicasReduced)
	expectCap("b", 4, metav1.ConditionTrue, agentraxv1alpha1.ReasonMaxReplicasReduced)
	setTotal(11, 10) // headroom 1 < min 2: clamped to min
	expectCap("a", 2, metav1.ConditionTrue, agentraxv1alpha1.ReasonHPAMaxReplicasCapped)
	g.Eventually(func(g Gomega) {
		tq := getQuota(g, ns, "q")
		c := meta.FindStatusCondition(tq.Status.Conditions, agentraxv1alpha1.ConditionOverQuota)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("replicas 20 > maxTotalReplicas 11"))
	}).Should(Succeed())
	// Nothing was deleted, and a shrinking update still passes over the lowered quota.
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
	g.Expect(a.DeletionTimestamp).To(BeNil())
	g.Expect(updateAgent(ns, "a", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 9 })).To(Succeed())
	g.Expect(updateAgent(ns, "b", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Min = 3 })).To(Succeed(),
		"min is not charged, max unchanged")
	// Growth is refused over the lowered quota.
	err := updateAgent(ns, "a", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 10 })
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	setTotal(20, 6) // per-agent cap
	expectCap("b", 6, metav1.ConditionTrue, agentraxv1alpha1.ReasonMaxReplicasReduced)
	setTotal(20, 10)
	expectCap("b", 10, metav1.ConditionFalse, agentraxv1alpha1.ReasonWithinQuota)
}

func TestDryRunNeverReserves(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 2, 8, 10, 10))).To(Succeed())

	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "dry", "q", 1, 4, 1), client.DryRunAll)).To(Succeed())
	err := env.Client.Create(ctx, agentDeployment(ns, "dry-big", "q", 1, 9, 1), client.DryRunAll)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a dry run is still checked: %v", err)
	g.Consistently(func(g Gomega) {
		g.Expect(getLedger(g, ns)).To(BeEmpty())
	}, time.Second, 100*time.Millisecond).Should(Succeed())

	ad := agentDeployment(ns, "real", "q", 1, 4, 1)
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	g.Expect(updateAgent(ns, "real", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 6 }, client.DryRunAll)).
		To(Succeed(), "growth fits (6 GPUs of 8) but a dry run reserves nothing")
	g.Expect(env.Client.Delete(ctx, ad, client.DryRunAll)).To(Succeed())
	g.Consistently(func(g Gomega) {
		ledger := getLedger(g, ns)
		g.Expect(ledger).To(HaveLen(1))
		g.Expect(ledger[0].GPUs).To(Equal(int64(4)))
	}, time.Second, 100*time.Millisecond).Should(Succeed())
}

// UPDATE reserves only the increase; shrinking settles after the grace period; a deleted agent's reservation is
// released once its pods are gone (TestQuotaHeldUntilPodsGone holds them longer).
func TestUpdateDeltasAndRelease(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 100, 10, 10))).To(Succeed())
	a := agentDeployment(ns, "a", "q", 1, 4, 0)
	b := agentDeployment(ns, "b", "q", 1, 4, 0)
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	g.Expect(env.Client.Create(ctx, b)).To(Succeed())
	reserved := func(g Gomega, name string) int32 {
		for _, r := range getLedger(g, ns) {
			if r.Name == name {
				return r.Replicas
			}
		}
		return -1
	}

	err := updateAgent(ns, "a", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 7 }) // 4 + 7 = 11 > 10
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("maxTotalReplicas: 4 reserved by other agents + 7 = 11 > 10"))

	g.Expect(updateAgent(ns, "a", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 6 })).To(Succeed())
	g.Expect(reserved(g, "a")).To(Equal(int32(6)), "the increase is reserved at admission")

	g.Expect(updateAgent(ns, "a", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 2 })).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(reserved(g, "a")).To(Equal(int32(2))) }).Should(Succeed(),
		"a shrink is settled by the controller")

	g.Expect(env.Client.Delete(ctx, b)).To(Succeed())
	// The garbage collector removes b's Deployment and pods once b is gone; then the controller releases it.
	g.Eventually(func(g Gomega) { g.Expect(reserved(g, "b")).To(Equal(int32(-1))) }).WithTimeout(time.Minute).Should(Succeed())
	g.Eventually(func(g Gomega) {
		tq := getQuota(g, ns, "q")
		g.Expect(tq.Status.UsedAgents).To(Equal(int32(1)))
		g.Expect(tq.Status.UsedTotalReplicas).To(Equal(int32(2)))
	}).Should(Succeed())
	// The freed room is available.
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "c", "q", 1, 8, 0))).To(Succeed())
}

// updateAgent reads the agent, applies edit and updates it, retrying only on write conflicts with the controller.
func updateAgent(ns, name string, edit func(*agentraxv1alpha1.AgentDeployment), opts ...client.UpdateOption) error {
	ctx := context.Background()
	for {
		ad := &agentraxv1alpha1.AgentDeployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ad); err != nil {
			return err
		}
		edit(ad)
		if err := env.Client.Update(ctx, ad, opts...); !apierrors.IsConflict(err) {
			return err
		}
	}
}
