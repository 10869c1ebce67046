package e2e_test

import (
	"context"
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
)

// An agent runs once its Deployment is Available — made so by the Deployment and ReplicaSet controllers, the
// scheduler and the simulated kubelet — and the HPA the operator writes is taken by the HPA controller.
func TestAgentRunsThroughTheRealControllers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	createQuota(g, ns, agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxGPUs: 8, MaxTotalReplicas: 20, MaxReplicasPerAgent: 10})
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planner"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{
			Image: "ghcr.io/org/agent:v1", TenantRef: "quota", Port: 8080,
			Replicas: agentraxv1alpha1.ReplicasSpec{Min: 2, Max: 4, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
				"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		},
	}
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)

	g.Eventually(func(g Gomega) {
		got := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning))
		g.Expect(got.Status.CurrentReplicas).To(Equal(int32(2)))
		dep := &appsv1.Deployment{}
		g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
		g.Expect(dep.Status.AvailableReplicas).To(Equal(int32(2)))
		var pods corev1.PodList
		g.Expect(env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "planner"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(p.Spec.NodeName).NotTo(BeEmpty())
		}
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	// The HPA controller takes the autoscaler: it can scale the Deployment, and — with no external metrics API
	// in this cluster — says which metric and selector it could not read.
	g.Eventually(func(g Gomega) {
		hpa := &autoscalingv2.HorizontalPodAutoscaler{}
		g.Expect(env.Client.Get(ctx, key, hpa)).To(Succeed())
		able := findHPACondition(hpa, autoscalingv2.AbleToScale)
		g.Expect(able).NotTo(BeNil())
		g.Expect(able.Status).To(Equal(corev1.ConditionTrue))
		active := findHPACondition(hpa, autoscalingv2.ScalingActive)
		g.Expect(active).NotTo(BeNil())
		g.Expect(active.Status).To(Equal(corev1.ConditionFalse))
		g.Expect(active.Reason).To(Equal("FailedGetExternalMetric"))
		g.Expect(active.Message).To(ContainSubstring("unable to get external metric " + ns + "/agentrax_queue_depth/"))
		g.Expect(active.Message).To(ContainSubstring("app_kubernetes_io_name: planner"))
		g.Expect(active.Message).To(ContainSubstring("namespace: " + ns))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// createQuota creates the TenantQuota "quota" in ns and waits until its ledger is built (admission reserves only
// then).
func createQuota(g Gomega, ns string, spec agentraxv1alpha1.TenantQuotaSpec) {
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &agentraxv1alpha1.TenantQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"}, Spec: spec})).To(Succeed())
	g.Eventually(func(g Gomega) {
		tq := &agentraxv1alpha1.TenantQuota{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "quota"}, tq)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(tq.Status.Conditions, agentraxv1alpha1.ConditionLedgerReady)).To(BeTrue())
	}).Should(Succeed())
}

func findHPACondition(hpa *autoscalingv2.HorizontalPodAutoscaler, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range hpa.Status.Conditions {
		if hpa.Status.Conditions[i].Type == t {
			return &hpa.Status.Conditions[i]
		}
	}
	return nil
}
