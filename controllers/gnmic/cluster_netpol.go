package gnmic

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete

// OperatorPodLabels are the labels every shipped manifest (kustomize, OLM bundle, Helm chart) gives the
// operator's pods.
var OperatorPodLabels = map[string]string{"control-plane": "controller-manager"}

// ensureAPINetworkPolicy writes NetworkPolicy gnmic-<cluster>-api: the collectors' REST API port (config apply,
// and GET /api/v1/config, which returns device passwords in clear) admits only the operator's pods; every other
// port, TCP and otherwise, stays open to all as before (gNMI server, tunnel, prometheus outputs). NetworkPolicies
// are additive, so an administrator grants more peers (a Prometheus scraping the API's /metrics) with a policy
// of their own.
func (r *ClusterReconciler) ensureAPINetworkPolicy(ctx context.Context, c *gnmicv1alpha1.Cluster) error {
	want := CollectorAPINetworkPolicy(c, r.OperatorNamespace)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: want.Namespace, Name: want.Name}}
	return r.createOrUpdate(ctx, c, np, func() {
		np.Labels = want.Labels
		np.Spec = want.Spec
	})
}

// CollectorAPINetworkPolicy returns the NetworkPolicy gnmic-<cluster>-api the controller keeps for c (without
// its owner reference), for an operator in operatorNamespace ("" when unknown). Exported, with
// CollectorPodLabels, so test/realnode can prove by traffic the very policy the controller writes.
func CollectorAPINetworkPolicy(c *gnmicv1alpha1.Cluster, operatorNamespace string) *networkingv1.NetworkPolicy {
	lbls := podLabels(c)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: clusterResourceName(c) + "-api", Labels: lbls},
		Spec:       collectorAPIPolicy(c.RestPort(), lbls, operatorNamespace),
	}
}

// CollectorPodLabels returns the labels of c's collector pods: the StatefulSet's pod template and selector, and
// the selector of its Services and of its NetworkPolicy.
func CollectorPodLabels(c *gnmicv1alpha1.Cluster) map[string]string { return podLabels(c) }

// collectorAPIPolicy selects the collector pods and admits restPort only from pods labelled OperatorPodLabels in
// operatorNamespace (any namespace when unknown: an operator running outside the cluster cannot be named, and
// reaches the pods from outside the pod network anyway); all other ports are admitted from anywhere.
func collectorAPIPolicy(restPort int32, lbls map[string]string, operatorNamespace string) networkingv1.NetworkPolicySpec {
	tcp, udp, sctp := corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	nsSelector := &metav1.LabelSelector{}
	if operatorNamespace != "" {
		nsSelector.MatchLabels = map[string]string{corev1.LabelMetadataName: operatorNamespace}
	}
	portRange := func(from, to int32) networkingv1.NetworkPolicyPort {
		p := networkingv1.NetworkPolicyPort{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(from))}
		if to > from {
			p.EndPort = &to
		}
		return p
	}
	var others []networkingv1.NetworkPolicyPort
	if restPort > 1 {
		others = append(others, portRange(1, restPort-1))
	}
	if restPort < 65535 {
		others = append(others, portRange(restPort+1, 65535))
	}
	others = append(others, networkingv1.NetworkPolicyPort{Protocol: &udp}, networkingv1.NetworkPolicyPort{Protocol: &sctp})
	return networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: lbls},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(restPort))}},
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: nsSelector,
					PodSelector: &metav1.LabelSelector{MatchLabels: OperatorPodLabels}}},
			},
			{Ports: others},
		},
	}
}
