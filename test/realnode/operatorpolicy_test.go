package realnode

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// managerPodTemplate reads the manager's pod template from config/manager/manager.yaml and adds the webhook port of
// config/default/manager_webhook_patch.yaml, so the stand-in below carries the operator pod's labels and ports.
func managerPodTemplate(t *testing.T) (map[string]string, []corev1.ContainerPort) {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "manager", "manager.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var d appsv1.Deployment
		if yaml.Unmarshal(doc, &d) != nil || d.Kind != "Deployment" {
			continue
		}
		ports := append([]corev1.ContainerPort(nil), d.Spec.Template.Spec.Containers[0].Ports...)
		ports = append(ports, corev1.ContainerPort{Name: "webhook-server", ContainerPort: 9443, Protocol: corev1.ProtocolTCP})
		return d.Spec.Template.Labels, ports
	}
	t.Fatal("no Deployment in config/manager/manager.yaml")
	return nil, nil
}

// operatorPolicies reads the NetworkPolicies of config/network-policy (the files its kustomization lists), moved
// into namespace ns.
func operatorPolicies(t *testing.T, ns string) []*networkingv1.NetworkPolicy {
	t.Helper()
	g := NewWithT(t)
	dir := filepath.Join(testenv.RepoRoot(), "config", "network-policy")
	var kustomization struct{ Resources []string }
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, &kustomization)).To(Succeed())
	g.Expect(kustomization.Resources).NotTo(BeEmpty())
	var policies []*networkingv1.NetworkPolicy
	for _, f := range kustomization.Resources {
		data, err := os.ReadFile(filepath.Join(dir, f))
		g.Expect(err).NotTo(HaveOccurred())
		np := &networkingv1.NetworkPolicy{}
		g.Expect(yaml.UnmarshalStrict(data, np)).To(Succeed(), f)
		np.Namespace = ns
		policies = append(policies, np)
	}
	return policies
}

// TestOperatorNetworkPolicyByTraffic applies config/network-policy to a stand-in of the manager pod and checks the
// claims of config/network-policy and docs/agentrax.md by traffic (see checkManagerPoliciesByTraffic).
func TestOperatorNetworkPolicyByTraffic(t *testing.T) {
	labels, ports := managerPodTemplate(t)
	checkManagerPoliciesByTraffic(t, labels, ports, func(ns string) []*networkingv1.NetworkPolicy { return operatorPolicies(t, ns) })
}

// checkManagerPoliciesByTraffic runs a stand-in of the manager pod (netprobe serving every port of the manager's
// pod template, with its labels), applies the policies made for its namespace and checks by traffic from pods:
// the MCP registry (9090), the refresh API (8082) and the webhooks (9443) are reachable from any namespace;
// metrics (8443) only from namespaces labelled metrics=enabled; every other port (the health port 8081) is
// refused to pods, while the kubelet's probes still pass. Then it deletes the registry and refresh-API policies
// and sees those ports close, so each port is open because of its own policy.
func checkManagerPoliciesByTraffic(t *testing.T, labels map[string]string, ports []corev1.ContainerPort, policies func(ns string) []*networkingv1.NetworkPolicy) {
	t.Helper()
	g := NewWithT(t)
	opNS := namespace(t, "realnode-operator")
	stand := runPod(t, standIn(opNS, "manager-stand-in", labels, ports, "health"))

	plainNS := namespace(t, "realnode-plain")
	metricsNS := namespace(t, "realnode-metrics")
	labelNamespace(t, metricsNS, "metrics", "enabled")
	plain := runPod(t, probePod(plainNS, "caller", map[string]string{"app": "caller"}))
	scraper := runPod(t, probePod(metricsNS, "scraper", map[string]string{"app": "scraper"}))

	// Without the policies every port answers: what is refused below is refused by them.
	for _, p := range ports {
		g.Eventually(reach(plain, stand, p.ContainerPort)).Should(Succeed(), "before the policies, port %s", p.Name)
	}

	applied := policies(opNS)
	g.Expect(applied).NotTo(BeEmpty())
	for _, np := range applied {
		g.Expect(env.Client.Create(context.Background(), np)).To(Succeed(), np.Name)
	}
	allowedEverywhere := map[string]int32{"mcp-registry": 9090, "refresh-api": 8082, "webhook-server": 9443}
	for name, port := range allowedEverywhere {
		g.Expect(ports).To(ContainElement(And(HaveField("Name", name), HaveField("ContainerPort", port))), "the manager's %s port", name)
	}
	// The refusals first: once they hold, the firewall has synced the policies.
	g.Eventually(reach(plain, stand, 8443)).Should(HaveOccurred(), "metrics from a namespace without metrics=enabled")
	g.Eventually(reach(plain, stand, 8081)).Should(HaveOccurred(), "the health port from a pod")
	for name, port := range allowedEverywhere {
		g.Consistently(reach(plain, stand, port), 3*time.Second, time.Second).Should(Succeed(), "%s (%d) from any namespace", name, port)
	}
	g.Eventually(reach(scraper, stand, 8443)).Should(Succeed(), "metrics from a namespace labelled metrics=enabled")
	g.Expect(reach(scraper, stand, 8081)()).To(HaveOccurred(), "the health port from the metrics namespace too")
	staysReady(t, stand)

	// Removing the registry and refresh-API policies closes those ports: the test fails if the shipped policies
	// stop admitting them (today's chart and kustomize policies name them; the report predates that).
	for _, np := range applied {
		if strings.HasSuffix(np.Name, "allow-registry-traffic") || strings.HasSuffix(np.Name, "allow-refresh-api-traffic") {
			g.Expect(env.Client.Delete(context.Background(), np)).To(Succeed())
		}
	}
	g.Eventually(reach(plain, stand, 9090)).Should(HaveOccurred(), "the registry without its policy")
	g.Eventually(reach(plain, stand, 8082)).Should(HaveOccurred(), "the refresh API without its policy")
	g.Expect(reach(plain, stand, 9443)()).To(Succeed(), "the webhooks keep their own policy")
}
