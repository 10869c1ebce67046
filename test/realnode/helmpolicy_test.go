package realnode

import (
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quartet-dev/quartet-operator/internal/helmchart"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// chartWithNetworkPolicies renders the Helm chart with networkPolicy.enabled, released into ns, as `helm template`
// does.
func chartWithNetworkPolicies(t *testing.T, ns string) (*appsv1.Deployment, []*networkingv1.NetworkPolicy) {
	t.Helper()
	g := NewWithT(t)
	objects, err := helmchart.Template(filepath.Join(testenv.RepoRoot(), helmchart.ChartDir), helmchart.TemplateOptions{
		ReleaseName: "quartet", Namespace: ns, KubeVersion: "v" + testenv.KubernetesVersion,
	}, map[string]any{"networkPolicy": map[string]any{"enabled": true}})
	g.Expect(err).NotTo(HaveOccurred())
	var manager *appsv1.Deployment
	var policies []*networkingv1.NetworkPolicy
	for _, obj := range objects {
		switch obj.GetKind() {
		case "NetworkPolicy":
			np := asNetworkPolicy(t, obj.Object)
			g.Expect(np.Namespace).To(Equal(ns), np.Name)
			policies = append(policies, np)
		case "Deployment":
			if obj.GetName() == helmchart.NamePrefix+"controller-manager" {
				manager = &appsv1.Deployment{}
				g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, manager)).To(Succeed())
			}
		}
	}
	g.Expect(manager).NotTo(BeNil(), "the chart's manager Deployment")
	return manager, policies
}

// TestHelmChartNetworkPolicyByTraffic renders the Helm chart with networkPolicy.enabled and applies its
// NetworkPolicies around a stand-in with the labels and container ports of the chart's own manager pod template,
// checking the claims of values.yaml and docs/install.md by traffic: the registry, the refresh API and the
// webhooks from any namespace, metrics only from namespaces labelled metrics=enabled, the health port refused,
// the kubelet's probes passing (see checkManagerPoliciesByTraffic).
func TestHelmChartNetworkPolicyByTraffic(t *testing.T) {
	g := NewWithT(t)
	// The Deployment's labels and ports do not depend on the namespace; the policies are rendered into the
	// stand-in's.
	manager, policies := chartWithNetworkPolicies(t, "any")
	g.Expect(policies).NotTo(BeEmpty(), "networkPolicy.enabled renders NetworkPolicies")
	for _, np := range policies {
		g.Expect(np.Spec.PodSelector.MatchLabels).NotTo(BeEmpty(), "%s selects the manager's pods by label", np.Name)
	}
	ctr := manager.Spec.Template.Spec.Containers[0]
	g.Expect(ctr.Name).To(Equal("manager"))
	ports := append([]corev1.ContainerPort(nil), ctr.Ports...)
	checkManagerPoliciesByTraffic(t, manager.Spec.Template.Labels, ports, func(ns string) []*networkingv1.NetworkPolicy {
		_, policies := chartWithNetworkPolicies(t, ns)
		return policies
	})
}
