package e2e_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// Every pod template the operator writes — agent Deployments and canaries, gNMIc collector StatefulSets, gitops stage
// Deployments (pharos included) — and the manager's own Deployment from config/manager is admitted as a Pod by a
// namespace that enforces the restricted Pod Security level (server-side dry run).
func TestEveryPodTemplateIsAdmittedUnderRestricted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)

	g.Expect(env.Client.Create(ctx, &agentraxv1alpha1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"},
		Spec: agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxGPUs: 8, MaxTotalReplicas: 20, MaxReplicasPerAgent: 10}})).To(Succeed())
	ad := &agentraxv1alpha1.AgentDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bot"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{Image: "ghcr.io/org/bot:v1", TenantRef: "quota", Port: 8080,
			Replicas:  agentraxv1alpha1.ReplicasSpec{Min: 1, Max: 2, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
			Rollout: &agentraxv1alpha1.RolloutSpec{Strategy: agentraxv1alpha1.StrategyCanary,
				Steps: []agentraxv1alpha1.RolloutStep{{SetWeight: ptr.To[int32](50)},
					{Pause: &agentraxv1alpha1.PauseStep{Duration: metav1.Duration{Duration: time.Hour}}}, {SetWeight: ptr.To[int32](100)}},
				Rollback: &agentraxv1alpha1.RollbackSpec{MaxErrorRate: "2%", MaxP99LatencyMs: 500, MinRequestSample: 50},
				Traffic: &agentraxv1alpha1.TrafficSpec{Route: &agentraxv1alpha1.OwnedRouteSpec{
					ParentRefs: []agentraxv1alpha1.GatewayParentRef{{Name: "shared-gateway"}}}}}}}
	// The quota's ledger is built first (until then admission answers 429).
	g.Eventually(func() error { return env.Client.Create(ctx, ad) }).Should(Succeed())
	g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "core"},
		Spec: gnmicv1alpha1.ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.45.0", Replicas: ptr.To[int32](1)}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317"}})).To(Succeed())

	// A new image starts a canary.
	g.Eventually(func(g Gomega) {
		got := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ad), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning))
		got.Spec.Image = "ghcr.io/org/bot:v2"
		g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	templates := map[string]corev1.PodTemplateSpec{}
	g.Eventually(func(g Gomega) {
		var deployments appsv1.DeploymentList
		g.Expect(env.Client.List(ctx, &deployments, client.InNamespace(ns))).To(Succeed())
		for _, d := range deployments.Items {
			templates["Deployment "+d.Name] = d.Spec.Template
		}
		var sets appsv1.StatefulSetList
		g.Expect(env.Client.List(ctx, &sets, client.InNamespace(ns))).To(Succeed())
		for _, s := range sets.Items {
			templates["StatefulSet "+s.Name] = s.Spec.Template
		}
		g.Expect(templates).To(HaveKey("Deployment bot"))
		agent := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(ad), agent)).To(Succeed())
		g.Expect(templates).To(HaveKey("Deployment bot-canary"), "agent status: %+v", agent.Status)
		g.Expect(templates).To(HaveKey("StatefulSet gnmic-core"))
		g.Expect(templates).To(HaveKey("Deployment katastroma-pharos"))
		g.Expect(templates).To(HaveKey("Deployment katastroma-provisioner"))
	}).WithTimeout(time.Minute).Should(Succeed())

	manager := managerTemplate(g)
	templates["config/manager Deployment"] = manager

	for what, tpl := range templates {
		if sa := tpl.Spec.ServiceAccountName; sa != "" {
			err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})
			g.Expect(err == nil || apierrors.IsAlreadyExists(err)).To(BeTrue(), "%v", err)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "dry-run-", Labels: tpl.Labels},
			Spec: tpl.Spec}
		g.Expect(env.Client.Create(ctx, pod, client.DryRunAll)).To(Succeed(), "a pod of the %s", what)
	}
	g.Expect(len(templates)).To(BeNumerically(">=", 11), "agent, canary, collector, 7 gitops stages and the manager")
}

// managerTemplate reads the pod template of the manager Deployment in config/manager/manager.yaml.
func managerTemplate(g Gomega) corev1.PodTemplateSpec {
	objs, err := testenv.ReadObjects(filepath.Join(testenv.RepoRoot(), "config", "manager", "manager.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d)).To(Succeed())
		return d.Spec.Template
	}
	g.Expect("a Deployment in config/manager/manager.yaml").To(BeEmpty())
	return corev1.PodTemplateSpec{}
}
