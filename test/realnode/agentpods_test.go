package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// Namespace annotations of the API server's PodNodeSelector and PodTolerationRestriction admission plugins: every
// pod created in the namespace gets this node selector and these tolerations merged into its own.
const (
	nodeSelectorAnnotation       = "scheduler.alpha.kubernetes.io/node-selector"
	defaultTolerationsAnnotation = "scheduler.alpha.kubernetes.io/defaultTolerations"
)

// realNodeNamespace is a test namespace (restricted Pod Security level) whose pods the API server steers to the
// real node, as a platform team steers a tenant's namespace to its nodes: nothing in the pods says so.
func realNodeNamespace(t *testing.T, prefix string) string {
	t.Helper()
	tolerations, err := json.Marshal([]corev1.Toleration{{Key: realnode.Taint, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoSchedule}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-",
		Labels: map[string]string{testenv.PodSecurityEnforceLabel: "restricted"},
		Annotations: map[string]string{
			nodeSelectorAnnotation:       realnode.NodeLabel + "=true",
			defaultTolerationsAnnotation: string(tolerations),
		}}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// registryAgent reads agent ns/name from the registry API; found is false on 404.
func registryAgent(ns, name string) (e registry.Entry, found bool, err error) {
	url, _ := registryURL.Load().(string)
	if url == "" {
		return e, false, fmt.Errorf("the registry API is not listening yet")
	}
	status, body, err := get(url + "/agents/" + ns + "/" + name)
	if err != nil || status == http.StatusNotFound {
		return e, false, err
	}
	if status != http.StatusOK {
		return e, false, fmt.Errorf("registry: %d %s", status, body)
	}
	return e, true, json.Unmarshal([]byte(body), &e)
}

// TestAgentPodRunsOnTheNodeAndIsDiscoveredByItsServiceName runs an AgentDeployment of the MCP test agent
// (./test/realnode/mcpagent) as a real pod: the AgentDeployment says nothing about nodes, its namespace's
// annotations make the API server's admission give the pod the real node's selector and toleration. The
// operator's registry, in this process, discovers the agent at http://<name>.<namespace>.svc:8080/mcp — its
// Service's name, resolved by the cluster DNS, no dial map — and lists the tools the agent serves.
func TestAgentPodRunsOnTheNodeAndIsDiscoveredByItsServiceName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	started := time.Now()
	ns := realNodeNamespace(t, "realnode-agents")
	g.Expect(env.Client.Create(ctx, &agentraxv1alpha1.TenantQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Spec: agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 2, MaxTotalReplicas: 4, MaxReplicasPerAgent: 2}})).To(Succeed())
	ad := &agentraxv1alpha1.AgentDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helper"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{Image: mcpAgentRef, TenantRef: "team",
			Args:     []string{"--tools=lookup-route,ping-device"},
			Replicas: agentraxv1alpha1.ReplicasSpec{Min: 1, Max: 1, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
			MCP:      &agentraxv1alpha1.MCPSpec{Expose: true, Tools: []string{"declared"}},
		}}
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)

	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns),
			client.MatchingLabels{agentraxv1alpha1.LabelName: ad.Name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1), "the agent's pods")
		pod := pods.Items[0]
		g.Expect(pod.Spec.NodeName).To(Equal(node.Name), "scheduled on the real node; node selector %v, tolerations %v, conditions %+v",
			pod.Spec.NodeSelector, pod.Spec.Tolerations, pod.Status.Conditions)
		g.Expect(pod.Status.Conditions).To(ContainElement(And(
			HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))), "pod status: %+v", pod.Status)
	}).WithTimeout(3*time.Minute).Should(Succeed(), "the agent's pod runs Ready on the real node")
	t.Logf("agent pod Ready on %s after %s", node.Name, time.Since(started).Round(time.Second))

	endpoint := fmt.Sprintf("http://helper.%s.svc:%d/mcp", ns, agentraxv1alpha1.DefaultPort)
	g.Eventually(func(g Gomega) {
		got := &agentraxv1alpha1.AgentDeployment{}
		g.Expect(env.Client.Get(ctx, key, got)).To(Succeed())
		g.Expect(got.Status.Registered).To(BeTrue(), "registered; MCPHandshakeFailed: %+v",
			meta.FindStatusCondition(got.Status.Conditions, agentraxv1alpha1.ConditionMCPHandshakeFailed))
		e, found, err := registryAgent(ns, ad.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(found).To(BeTrue(), "in the registry")
		g.Expect(e.Endpoint).To(Equal(endpoint), "the Service's in-cluster address")
		g.Expect(e.Tools).To(Equal([]string{"declared", "lookup-route", "ping-device"}), "the served tools, merged with the declared one")
		g.Expect(e.ToolInfo).To(ContainElement(HaveField("Description", "test tool ping-device")), "what the agent said of its tools")
	}).WithTimeout(2*time.Minute).Should(Succeed(), "the registry discovers the agent at %s", endpoint)
	t.Logf("agent discovered at %s after %s", endpoint, time.Since(started).Round(time.Second))

	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(ctx, key, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.NodeSelector).To(BeEmpty(), "the operator's Deployment asks for no node")
	g.Expect(dep.Spec.Template.Spec.Tolerations).To(BeEmpty(), "the operator's Deployment tolerates nothing")
}
