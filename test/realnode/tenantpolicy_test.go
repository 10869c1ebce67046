package realnode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// labelNamespace adds a label to a namespace.
func labelNamespace(t *testing.T, name, key, value string) {
	t.Helper()
	g := NewWithT(t)
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: name}, ns)).To(Succeed())
	ns.Labels[key] = value
	g.Expect(env.Client.Update(context.Background(), ns)).To(Succeed())
}

// TestTenantNetworkPolicyByTraffic applies the agentrax tenant policy (config/components/
// agentrax-tenant-network-policy, as shipped) to an agent pod and checks its comments by traffic: the agent's named
// port "http" answers the operator's pods (found by label in another namespace), the Gateway's namespace and
// namespaces labelled monitoring=enabled, and nobody else, its own namespace included; the agent itself reaches no
// other pod (egress is DNS and the API server's ipBlock only).
func TestTenantNetworkPolicyByTraffic(t *testing.T) {
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "components", "agentrax-tenant-network-policy", "tenant-agent-isolation.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	policy := &networkingv1.NetworkPolicy{}
	g.Expect(yaml.UnmarshalStrict(data, policy)).To(Succeed())

	tenantNS := namespace(t, "realnode-tenant")
	agent := runPod(t, probePod(tenantNS, "agent", map[string]string{"agentrax.io/agent": "true"}))
	neighbour := runPod(t, probePod(tenantNS, "neighbour", map[string]string{"app": "neighbour"}))
	operatorLabels, _ := managerPodTemplate(t)
	operator := runPod(t, probePod(namespace(t, "realnode-op"), "operator", operatorLabels))
	gatewayNS := namespace(t, "realnode-gateway")
	labelNamespace(t, gatewayNS, "agentrax.io/gateway", "true")
	gateway := runPod(t, probePod(gatewayNS, "gateway", map[string]string{"app": "gateway"}))
	monitoringNS := namespace(t, "realnode-monitoring")
	labelNamespace(t, monitoringNS, "monitoring", "enabled")
	prometheus := runPod(t, probePod(monitoringNS, "prometheus", map[string]string{"app": "prometheus"}))
	stranger := runPod(t, probePod(namespace(t, "realnode-stranger"), "stranger", map[string]string{
		// The operator's labels minus one: the rule selects by both.
		"control-plane": "controller-manager"}))

	// The agent's container port "http" is netprobe's.
	const agentPort = 8080
	for _, from := range []*corev1.Pod{neighbour, operator, gateway, prometheus, stranger} {
		g.Eventually(reach(from, agent, agentPort)).Should(Succeed(), "before the policy, from %s", from.Name)
	}
	g.Eventually(reach(agent, neighbour, agentPort)).Should(Succeed(), "before the policy, the agent reaches its neighbour")

	policy.Namespace = tenantNS
	g.Expect(env.Client.Create(context.Background(), policy)).To(Succeed())
	g.Eventually(reach(stranger, agent, agentPort)).Should(HaveOccurred(), "a pod with only some of the operator's labels")
	g.Eventually(reach(neighbour, agent, agentPort)).Should(HaveOccurred(), "a pod of the tenant's own namespace")
	g.Eventually(reach(agent, neighbour, agentPort)).Should(HaveOccurred(), "egress from the agent to another pod")
	for _, from := range []*corev1.Pod{operator, gateway, prometheus} {
		g.Consistently(reach(from, agent, agentPort), 2*time.Second, time.Second).Should(Succeed(), "from %s/%s", from.Namespace, from.Name)
	}
}
