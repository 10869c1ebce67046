package realnode

import (
	"context"
	"maps"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
)

// TestCollectorAPINetworkPolicyByTraffic applies the NetworkPolicy the gnmic-cluster controller keeps for a
// Cluster (gnmic.CollectorAPINetworkPolicy, the builder the controller itself writes it with) around a stand-in
// collector pod carrying the labels of the Cluster's StatefulSet pods (gnmic.CollectorPodLabels), and checks the
// claims of docs/gnmic.md ("Who may reach the collectors' API") by traffic: the REST API port answers only pods
// labelled gnmic.OperatorPodLabels in the operator's namespace — not an unlabelled pod of that namespace, not an
// operator-labelled pod elsewhere —; every other TCP port (the gNMI port, the ports either side of the API's, the
// top of the range) and UDP, on the API's port number too, stay open to every pod; the kubelet's readiness probe
// on the API port still passes. With no operator namespace (an operator outside the cluster) the API admits
// operator-labelled pods of any namespace, and still no others.
func TestCollectorAPINetworkPolicyByTraffic(t *testing.T) {
	g := NewWithT(t)
	collectorNS := namespace(t, "realnode-collectors")
	opNS := namespace(t, "realnode-operator")
	otherNS := namespace(t, "realnode-other")
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: collectorNS, Name: "telemetry"},
		Spec: gnmicv1alpha1.ClusterSpec{API: &gnmicv1alpha1.ClusterAPI{GNMIPort: 57400}}}
	rest := c.RestPort()
	g.Expect(rest).To(Equal(gnmicv1alpha1.DefaultRestPort))

	// The collector's own ports (named as the StatefulSet's pod template names them), and probes of the port
	// ranges the policy opens around the API's port: both ends of each range's edges.
	ports := []corev1.ContainerPort{
		{Name: "rest", ContainerPort: rest},
		{Name: "gnmi", ContainerPort: c.Spec.API.GNMIPort},
		{Name: "below-rest", ContainerPort: rest - 1},
		{Name: "above-rest", ContainerPort: rest + 1},
		{Name: "top", ContainerPort: 65535},
	}
	collector := runPod(t, standIn(collectorNS, "gnmic-telemetry-0", gnmic.CollectorPodLabels(c), ports, "rest", rest))
	operator := runPod(t, probePod(opNS, "operator", maps.Clone(gnmic.OperatorPodLabels)))
	unlabelled := runPod(t, probePod(opNS, "unlabelled", map[string]string{"app": "caller"}))
	impostor := runPod(t, probePod(otherNS, "impostor", maps.Clone(gnmic.OperatorPodLabels)))
	everyone := []*corev1.Pod{operator, unlabelled, impostor}

	// Without the policy every port answers everyone: what is refused below is refused by it.
	for _, from := range everyone {
		for _, p := range ports {
			g.Eventually(reach(from, collector, p.ContainerPort)).Should(Succeed(), "before the policy, %s from %s", p.Name, from.Name)
		}
		g.Eventually(reachUDP(from, collector, rest)).Should(Succeed(), "before the policy, UDP from %s", from.Name)
	}

	policy := gnmic.CollectorAPINetworkPolicy(c, opNS)
	g.Expect(policy.Namespace).To(Equal(collectorNS))
	g.Expect(env.Client.Create(context.Background(), policy)).To(Succeed())

	// The refusals first: once they hold, the firewall has synced the policy.
	g.Eventually(reach(unlabelled, collector, rest)).Should(HaveOccurred(), "the API from an unlabelled pod of the operator's namespace")
	g.Eventually(reach(impostor, collector, rest)).Should(HaveOccurred(), "the API from an operator-labelled pod of another namespace")
	g.Consistently(reach(operator, collector, rest), 3*time.Second, time.Second).Should(Succeed(), "the API from the operator")
	for _, from := range everyone {
		for _, p := range ports[1:] {
			g.Expect(reach(from, collector, p.ContainerPort)()).To(Succeed(), "%s (%d) from %s/%s", p.Name, p.ContainerPort, from.Namespace, from.Name)
		}
		g.Expect(reachUDP(from, collector, rest)()).To(Succeed(), "UDP on the API's port number from %s/%s", from.Namespace, from.Name)
	}
	staysReady(t, collector)

	// The operator's namespace unknown (the operator runs outside the cluster): operator-labelled pods of any
	// namespace reach the API, others still do not.
	open := gnmic.CollectorAPINetworkPolicy(c, "")
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(policy), policy)).To(Succeed())
	policy.Spec = open.Spec
	g.Expect(env.Client.Update(context.Background(), policy)).To(Succeed())
	g.Eventually(reach(impostor, collector, rest)).Should(Succeed(), "the API from an operator-labelled pod of any namespace")
	g.Consistently(reach(unlabelled, collector, rest), 3*time.Second, time.Second).Should(HaveOccurred(), "the API from an unlabelled pod")
	g.Expect(reach(operator, collector, rest)()).To(Succeed(), "the API from the operator")
}
