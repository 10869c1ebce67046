package hpareal

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
)

// scaledAgent is an agent whose pods each report one value of its scaling metric.
type scaledAgent struct {
	name   string
	metric agentraxv1alpha1.ScalingMetric
	series string // the metric the pods export
	target int32  // spec.replicas.target: the per-pod value the HPA aims for
	perPod float64
	// pods exports one series per simulated pod, all in one scrape: a step from 5 to 10 pods reaches the HPA
	// whole, never as 8 pods' worth that it would scale to and then, within its 10 % tolerance, keep.
	pods *promlab.App
}

// TestDesiredReplicasFollowTotalLoad: for each scaling metric the HPA asks for ceil(total load ÷ per-pod target)
// pods, the total being the sum over the pods reporting — with 1, 5 and 10 pods. A GPU agent whose pods run at
// 90 % against a 70 % target needs 2, 7 and 13 pods (not 2 whatever its size, which averaging the metric would
// give); a queue agent whose pods hold 8 requests each against a target of 5 needs 2, 8 and 16. Each answer is
// then carried out on the cluster: the Deployment runs that many Available (simulated) pods.
func TestDesiredReplicasFollowTotalLoad(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	prom := promlab.StartPrometheus(t)
	startAdapter(t, prom)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hpa-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, ns) })
	g.Expect(env.Client.Create(ctx, &agentraxv1alpha1.TenantQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "quota"},
		Spec:       agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 2, MaxGPUs: 20, MaxTotalReplicas: 40, MaxReplicasPerAgent: 20},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		tq := &agentraxv1alpha1.TenantQuota{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "quota"}, tq)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(tq.Status.Conditions, agentraxv1alpha1.ConditionLedgerReady)).To(BeTrue())
	}).Should(Succeed())

	agents := []*scaledAgent{
		{name: "gpu-agent", metric: agentraxv1alpha1.MetricGPUUtilization, series: "agentrax_gpu_utilization", target: 70, perPod: 90},
		{name: "queue-agent", metric: agentraxv1alpha1.MetricQueueDepth, series: "agentrax_queue_depth", target: 5, perPod: 8},
	}
	for _, a := range agents {
		ad := &agentraxv1alpha1.AgentDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: a.name},
			Spec: agentraxv1alpha1.AgentDeploymentSpec{
				Image: "ghcr.io/org/agent:v1", TenantRef: "quota", Port: 8080,
				Replicas: agentraxv1alpha1.ReplicasSpec{Min: 1, Max: 20, Metric: a.metric, Target: a.target},
			},
		}
		if a.metric == agentraxv1alpha1.MetricGPUUtilization {
			ad.Spec.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		}
		g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
		a.pods = promlab.StartApp(t, ns.Name, a.name, agentraxv1alpha1.VariantStable)
		g.Expect(prom.AddTargets(a.pods)).To(Succeed())
	}

	for _, pods := range []int{1, 5, 10} {
		for _, a := range agents {
			values := make([]float64, pods)
			for i := range values {
				values[i] = a.perPod
			}
			a.pods.SetPodGauges(a.series, values)
		}
		for _, a := range agents {
			want := int32(math.Ceil(float64(pods) * a.perPod / float64(a.target)))
			g.Eventually(func(g Gomega) {
				hpa := &autoscalingv2.HorizontalPodAutoscaler{}
				g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: a.name}, hpa)).To(Succeed())
				g.Expect(hpaReadsItsMetric(hpa)).To(Succeed())
				g.Expect(hpa.Status.DesiredReplicas).To(Equal(want), "%s with %d pods at %v against %d; metrics %s",
					a.name, pods, a.perPod, a.target, describeMetrics(hpa))
			}).WithTimeout(90*time.Second).WithPolling(time.Second).Should(Succeed(), "%s with %d pods", a.name, pods)
			// And the scale is carried out: the HPA controller resizes the Deployment, the Deployment and
			// ReplicaSet controllers make the pods, the scheduler and the simulated kubelet run them, and the
			// operator reports them.
			g.Eventually(func(g Gomega) {
				key := client.ObjectKey{Namespace: ns.Name, Name: a.name}
				dep := &appsv1.Deployment{}
				g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
				g.Expect(dep.Status.AvailableReplicas).To(Equal(want), "%s: Deployment available replicas", a.name)
				ad := &agentraxv1alpha1.AgentDeployment{}
				g.Expect(env.Client.Get(ctx, key, ad)).To(Succeed())
				g.Expect(ad.Status.CurrentReplicas).To(Equal(want), "%s: the agent's current replicas", a.name)
			}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "%s scaled to %d", a.name, want)
		}
	}
}

// hpaReadsItsMetric fails until the HPA controller has read the external metric.
func hpaReadsItsMetric(hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	for _, c := range hpa.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive && c.Status != corev1.ConditionTrue {
			return fmt.Errorf("ScalingActive %s: %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	if len(hpa.Status.CurrentMetrics) == 0 {
		return fmt.Errorf("no current metrics yet (conditions %v)", hpa.Status.Conditions)
	}
	return nil
}

func describeMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) string {
	out := ""
	for _, m := range hpa.Status.CurrentMetrics {
		if m.External != nil && m.External.Current.AverageValue != nil {
			out += fmt.Sprintf("%s averageValue=%s ", m.External.Metric.Name, m.External.Current.AverageValue)
		}
	}
	return fmt.Sprintf("%s(current replicas %d)", out, hpa.Status.CurrentReplicas)
}
