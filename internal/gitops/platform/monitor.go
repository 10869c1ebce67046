package platform

import (
	"maps"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// ServiceMonitorName is the ServiceMonitor each Platform gets in its own namespace.
const ServiceMonitorName = "katastroma-metrics"

// ServiceMonitor scrapes the plain-HTTP metrics port of the Platform's stages and pharos. It lives in the
// Platform's namespace and selects only that namespace, because OpenShift's user-workload monitoring ignores
// `namespaceSelector: any`: one monitor in the operator's namespace would never see a Platform elsewhere. extra are
// the manager's --monitoring-labels (a Prometheus that selects monitors by label, e.g. kube-prometheus-stack's).
func ServiceMonitor(p *gitopsv1alpha1.Platform, extra map[string]string) *monitoringv1.ServiceMonitor {
	selector := map[string]string{"app.kubernetes.io/name": "katastroma", "app.kubernetes.io/instance": p.Name,
		"app.kubernetes.io/managed-by": "quartet-operator"}
	labels := maps.Clone(extra)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, selector)
	labels["app.kubernetes.io/component"] = "gitops"
	return &monitoringv1.ServiceMonitor{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: ServiceMonitorName, Labels: labels},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector:  metav1.LabelSelector{MatchLabels: selector},
			Endpoints: []monitoringv1.Endpoint{{Port: "metrics", Path: "/metrics", Scheme: ptr.To(monitoringv1.SchemeHTTP)}},
		},
	}
}
