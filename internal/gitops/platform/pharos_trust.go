package platform

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// What pharos trusts: the source handlers, span senders and state writers of its own Platform only
// (docs/pharos.md, "Trust").

// SourceHandlerAddresses are the source handler addresses a Platform deploys: the address its source handler's
// spans name (OTEL_RESOURCE_ATTRIBUTES) and the only ones its pharos dials (--source-handlers). One function
// feeds both, so they cannot drift apart.
func SourceHandlerAddresses(p *gitopsv1alpha1.Platform) []string {
	return []string{Endpoint(p, gitopsv1alpha1.StageSource)}
}

// CollectorPodLabels are the labels the OTel Collector pods of a Platform carry, in the Platform's namespace
// (where the routing ConfigMap they mount lives): pharos's OTLP ports admit them. The Platform does not run the
// collector; whoever deploys it sets these pod labels.
func CollectorPodLabels(p *gitopsv1alpha1.Platform) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "katastroma", "app.kubernetes.io/instance": p.Name,
		"app.kubernetes.io/component": CollectorComponent}
}

// CollectorComponent is the app.kubernetes.io/component of the collector's pods and routing ConfigMap.
const CollectorComponent = "otel-collector"

// pharosOTLPRule admits the Platform's pipeline stages (which may export to pharos directly) and its collector
// to pharos's OTLP ports; pod selectors without a namespace selector stay in the Platform's namespace.
func pharosOTLPRule(p *gitopsv1alpha1.Platform) networkingv1.NetworkPolicyIngressRule {
	tcp := corev1.ProtocolTCP
	rule := networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{
		{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(OTLPGRPCPort))},
		{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(OTLPHTTPPort))},
	}}
	for _, stage := range Stages {
		if stage != gitopsv1alpha1.StagePharos {
			rule.From = append(rule.From, networkingv1.NetworkPolicyPeer{
				PodSelector: &metav1.LabelSelector{MatchLabels: Labels(p, stage)}})
		}
	}
	rule.From = append(rule.From, networkingv1.NetworkPolicyPeer{
		PodSelector: &metav1.LabelSelector{MatchLabels: CollectorPodLabels(p)}})
	return rule
}

// strategy of a stage's Deployment: pharos is replaced with Recreate (the old pod is gone before the new one
// starts), so its state ConfigMap never has two writers, not even during a rollout; the stateless stages roll.
func strategy(stage string) appsv1.DeploymentStrategy {
	if stage == gitopsv1alpha1.StagePharos {
		return appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
	}
	return appsv1.DeploymentStrategy{}
}
