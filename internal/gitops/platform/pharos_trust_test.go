package platform

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// admits evaluates the ingress rules of one NetworkPolicy, as a CNI does, for a TCP connection from a pod (its
// namespace, namespace labels and pod labels) to port on a pod the policy selects. Rules are ORed; a rule without
// peers admits every source, one without ports every port; a peer with only a podSelector means the policy's
// namespace.
func admits(g Gomega, np *networkingv1.NetworkPolicy, ns string, nsLabels, pod map[string]string, port int) bool {
	match := func(sel *metav1.LabelSelector, set map[string]string) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		g.Expect(err).NotTo(HaveOccurred())
		return s.Matches(labels.Set(set))
	}
	peerMatches := func(peer networkingv1.NetworkPolicyPeer) bool {
		g.Expect(peer.IPBlock).To(BeNil(), "the pharos policy names pods, not addresses")
		if peer.NamespaceSelector == nil && ns != np.Namespace {
			return false
		}
		if peer.NamespaceSelector != nil && !match(peer.NamespaceSelector, nsLabels) {
			return false
		}
		return peer.PodSelector == nil || match(peer.PodSelector, pod)
	}
	for _, r := range np.Spec.Ingress {
		portOK := len(r.Ports) == 0
		for _, p := range r.Ports {
			g.Expect(p.Protocol).To(HaveValue(Equal(corev1.ProtocolTCP)))
			portOK = portOK || p.Port == nil || p.Port.IntValue() == port
		}
		if !portOK {
			continue
		}
		if len(r.From) == 0 {
			return true
		}
		for _, peer := range r.From {
			if peerMatches(peer) {
				return true
			}
		}
	}
	return false
}

// TestPharosNetworkPolicyAdmitsOnlyStagesAndCollector: pharos's OTLP ports admit exactly the Platform's six stage
// pods and its collector's pods; a foreign pod (in the Platform's namespace, or in another namespace carrying the
// collector's labels) is refused; the metrics port stays open to Prometheus.
func TestPharosNetworkPolicyAdmitsOnlyStagesAndCollector(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	np := NetworkPolicy(p, "pharos")
	g.Expect(np.Spec.PodSelector.MatchLabels).To(Equal(Labels(p, "pharos")))
	g.Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))

	collector := map[string]string{"app.kubernetes.io/name": "katastroma", "app.kubernetes.io/instance": "main",
		"app.kubernetes.io/component": "otel-collector"}
	var otlpPeers []map[string]string
	for _, r := range np.Spec.Ingress {
		var ports []int
		for _, port := range r.Ports {
			ports = append(ports, port.Port.IntValue())
		}
		if len(r.From) == 0 {
			g.Expect(ports).To(Equal([]int{MetricsPort}), "only the metrics port is open to every source")
			continue
		}
		g.Expect(ports).To(ConsistOf(OTLPGRPCPort, OTLPHTTPPort))
		for _, peer := range r.From {
			g.Expect(peer.NamespaceSelector).To(BeNil(), "peers in the Platform's namespace only")
			otlpPeers = append(otlpPeers, peer.PodSelector.MatchLabels)
		}
	}
	g.Expect(otlpPeers).To(ConsistOf(Labels(p, "source"), Labels(p, "renderer"), Labels(p, "orderer"),
		Labels(p, "labeler"), Labels(p, "provisioner"), Labels(p, "pruner"), collector))

	second := platform() // another Platform in the same namespace
	second.Name = "other"
	home := map[string]string{"kubernetes.io/metadata.name": p.Namespace}
	other := map[string]string{"kubernetes.io/metadata.name": "tenant-a"}
	for _, c := range []struct {
		name   string
		ns     string
		nsL    map[string]string
		pod    map[string]string
		port   int
		admits bool
	}{
		{"a stage pod on OTLP/gRPC", p.Namespace, home, Labels(p, "provisioner"), OTLPGRPCPort, true},
		{"a stage pod on OTLP/HTTP", p.Namespace, home, Labels(p, "source"), OTLPHTTPPort, true},
		{"the collector", p.Namespace, home, collector, OTLPGRPCPort, true},
		{"a foreign pod of the namespace", p.Namespace, home, map[string]string{"app": "curl"}, OTLPGRPCPort, false},
		{"a foreign pod on OTLP/HTTP", p.Namespace, home, map[string]string{"app": "curl"}, OTLPHTTPPort, false},
		{"collector labels in another namespace", "tenant-a", other, collector, OTLPGRPCPort, false},
		{"a stage's labels in another namespace", "tenant-a", other, Labels(p, "source"), OTLPHTTPPort, false},
		{"another Platform's stage", p.Namespace, home, Labels(second, "source"), OTLPGRPCPort, false},
		{"Prometheus on metrics", "monitoring", map[string]string{}, map[string]string{"app": "prometheus"}, MetricsPort, true},
		{"a foreign pod on the gRPC port pharos does not serve", p.Namespace, home, map[string]string{"app": "curl"}, GRPCPort, false},
	} {
		g.Expect(admits(g, np, c.ns, c.nsL, c.pod, c.port)).To(Equal(c.admits), c.name)
	}
}

// TestPharosIsASingleWriter: pharos's Deployment stops the old pod before the new one starts, so its state
// ConfigMap never has two writers; the stateless stages keep rolling updates.
func TestPharosIsASingleWriter(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	g.Expect(Deployment(p, "pharos").Spec.Strategy.Type).To(Equal(appsv1.RecreateDeploymentStrategyType))
	for _, stage := range Stages[:len(Stages)-1] {
		g.Expect(Deployment(p, stage).Spec.Strategy.Type).NotTo(Equal(appsv1.RecreateDeploymentStrategyType), stage)
	}
}

// TestPharosTrustsTheSourceHandlerThePlatformDeploys: pharos's known source handlers are exactly the address the
// source handler's spans carry.
func TestPharosTrustsTheSourceHandlerThePlatformDeploys(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	var spanAddr string
	for _, e := range Deployment(p, "source").Spec.Template.Spec.Containers[0].Env {
		if e.Name == "OTEL_RESOURCE_ATTRIBUTES" {
			spanAddr = e.Value[len("katastroma.source_handler.address="):]
		}
	}
	g.Expect(spanAddr).To(Equal("katastroma-source.katastroma-system.svc:50051"))
	g.Expect(Args(p, "pharos")).To(ContainElement("--source-handlers=" + spanAddr))
}
