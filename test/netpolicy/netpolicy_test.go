// Package netpolicy applies the agentrax tenant network policy component (config/components/
// agentrax-tenant-network-policy) on a real kube-apiserver, as shipped and with its documented patches, and
// asserts every stored rule's peers and ports: what the API server keeps is what a CNI enforces. It runs on the
// cluster-grade control plane (Kubernetes' own controllers, scheduler and simulated nodes) as a user's cluster
// would store the policies, namespace controller and admission included.
package netpolicy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{Cluster: &testenv.ClusterOptions{Nodes: 1}}))
}

const component = "config/components/agentrax-tenant-network-policy"

// build renders an overlay of namespace ns that includes the component, plus extra overlay text (patches).
func build(t *testing.T, ns, extra string) *networkingv1.NetworkPolicy {
	t.Helper()
	g := NewWithT(t)
	fs := filesys.MakeFsInMemory()
	for _, f := range []string{"kustomization.yaml", "tenant-agent-isolation.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), component, f))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fs.WriteFile(filepath.Join("/component", f), data)).To(Succeed())
	}
	overlay := "namespace: " + ns + "\ncomponents:\n- ../component\n" + extra
	g.Expect(fs.WriteFile("/overlay/kustomization.yaml", []byte(overlay))).To(Succeed())
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	res, err := krusty.MakeKustomizer(opts).Run(fs, "/overlay")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Resources()).To(HaveLen(1))
	data, err := res.Resources()[0].AsYAML()
	g.Expect(err).NotTo(HaveOccurred())
	np := &networkingv1.NetworkPolicy{}
	g.Expect(yaml.UnmarshalStrict(data, np)).To(Succeed())
	return np
}

// apply creates np in its namespace and returns it as the API server stored it.
func apply(t *testing.T, np *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicy {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: np.Namespace}}))).To(Succeed())
	g.Expect(env.Client.Create(ctx, np)).To(Succeed())
	stored := &networkingv1.NetworkPolicy{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(np), stored)).To(Succeed())
	return stored
}

func tcp(ports ...int) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		proto, port := corev1.ProtocolTCP, intstr.FromInt32(int32(p))
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port})
	}
	return out
}

func named(ports ...string) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, 0, len(ports))
	for _, p := range ports {
		proto, port := corev1.ProtocolTCP, intstr.FromString(p)
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &port})
	}
	return out
}

func nsSelector(labels map[string]string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: labels}
}

func expectRules(g Gomega, np *networkingv1.NetworkPolicy, apiServerCIDRs []string) {
	g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"agentrax.io/agent": "true"}))
	g.Expect(np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))

	g.Expect(np.Spec.Ingress).To(HaveLen(3))
	gateway, operator, monitoring := np.Spec.Ingress[0], np.Spec.Ingress[1], np.Spec.Ingress[2]
	g.Expect(gateway.From).To(Equal([]networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: nsSelector(map[string]string{"agentrax.io/gateway": "true"})}}), "the Gateway's namespace")
	// The agent container's port is named "http" (whatever spec.port says): a number would miss every agent
	// whose port is not 8080.
	g.Expect(gateway.Ports).To(Equal(named("http")))
	g.Expect(operator.From).To(Equal([]networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{},
		PodSelector: nsSelector(map[string]string{"control-plane": "controller-manager",
			"app.kubernetes.io/name": "quartet-operator"}),
	}}), "the operator's pods (registry probes) in whatever namespace Helm or OLM installed them")
	g.Expect(operator.Ports).To(Equal(named("http")))
	g.Expect(monitoring.From).To(Equal([]networkingv1.NetworkPolicyPeer{
		{NamespaceSelector: nsSelector(map[string]string{"monitoring": "enabled"})}}))
	g.Expect(monitoring.Ports).To(Equal(named("http")))

	g.Expect(np.Spec.Egress).To(HaveLen(2))
	dns, api := np.Spec.Egress[0], np.Spec.Egress[1]
	g.Expect(dns.To).To(Equal([]networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: nsSelector(map[string]string{"kubernetes.io/metadata.name": "kube-system"}),
		PodSelector:       nsSelector(map[string]string{"k8s-app": "kube-dns"}),
	}}))
	udp, port := corev1.ProtocolUDP, intstr.FromInt32(53)
	g.Expect(dns.Ports).To(Equal(append([]networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}}, tcp(53)...)))
	var peers []networkingv1.NetworkPolicyPeer
	for _, c := range apiServerCIDRs {
		peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	g.Expect(api.To).To(Equal(peers), "443/6443 only to the API server's addresses, never to any host")
	g.Expect(api.Ports).To(Equal(tcp(443, 6443)))
}

func TestTenantPolicyAsShipped(t *testing.T) {
	g := NewWithT(t)
	stored := apply(t, build(t, "tenant-alpha", ""))
	expectRules(g, stored, []string{"192.0.2.1/32"})
}

// The patch documented in the component's kustomization: the API server's addresses.
func TestTenantPolicyWithDocumentedPatch(t *testing.T) {
	g := NewWithT(t)
	patch := `patches:
- target: {kind: NetworkPolicy, name: tenant-agent-isolation}
  patch: |-
    - op: replace
      path: /spec/egress/1/to/0/ipBlock/cidr
      value: 172.18.0.2/32
    - op: add
      path: /spec/egress/1/to/-
      value: {ipBlock: {cidr: 172.18.0.3/32}}
`
	stored := apply(t, build(t, "tenant-beta", patch))
	expectRules(g, stored, []string{"172.18.0.2/32", "172.18.0.3/32"})
}

// The operator tier (config/network-policy, Helm networkPolicy.enabled) admits every port the manager serves to
// other pods — metrics, webhooks, the MCP registry and the TargetSource refresh API — and each port it names is
// one the manager container declares, by name or number. What a CNI then enforces is proven by traffic where
// policies are enforced (the real-node issue), not here.
func TestOperatorPoliciesAdmitEveryServingPort(t *testing.T) {
	g := NewWithT(t)
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(),
		filepath.Join(testenv.RepoRoot(), "config", "network-policy"))
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "manager", "manager.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	declared := map[string]int32{}
	for _, doc := range strings.Split(string(data), "\n---") {
		dep := &appsv1.Deployment{}
		if yaml.Unmarshal([]byte(doc), dep) != nil || dep.Kind != "Deployment" {
			continue
		}
		for _, c := range dep.Spec.Template.Spec.Containers {
			for _, p := range c.Ports {
				declared[p.Name] = p.ContainerPort
			}
		}
	}
	g.Expect(declared).NotTo(BeEmpty())
	admitted := map[int32]bool{}
	ns := "operator-tier"
	for _, r := range res.Resources() {
		y, err := r.AsYAML()
		g.Expect(err).NotTo(HaveOccurred())
		np := &networkingv1.NetworkPolicy{}
		g.Expect(yaml.UnmarshalStrict(y, np)).To(Succeed())
		np.Namespace = ns
		stored := apply(t, np)
		for _, rule := range stored.Spec.Ingress {
			for _, p := range rule.Ports {
				port := p.Port.IntVal
				if p.Port.Type == intstr.String {
					n, ok := declared[p.Port.StrVal]
					g.Expect(ok).To(BeTrue(), "%s names port %q, which the manager container does not declare", np.Name, p.Port.StrVal)
					port = n
				}
				admitted[port] = true
			}
		}
	}
	for _, port := range []int32{8443, 9443, 9090, 8082} {
		g.Expect(admitted).To(HaveKey(port), "port %d of the manager is admitted", port)
	}
}
