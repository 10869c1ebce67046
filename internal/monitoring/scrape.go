package monitoring

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The metrics CA ConfigMap the manager's own metrics certificate publishes (internal/webhookcert's CAConfigMap),
// in the operator's namespace. The scraper's ServiceAccount, token Secret and binding are shipped
// (config/rbac/metrics_scraper.yaml): the escalation guard refuses the operator token Secrets and TokenRequests.
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,verbs=get;create;update

// Names of the manager's ServiceMonitor and of what its scrape uses, as config/prometheus writes them.
const (
	ManagerMonitorName = "quartet-operator-controller-manager-metrics-monitor"
	MetricsServiceName = "quartet-operator-controller-manager-metrics-service"
	// ScraperServiceAccount is bound to the metrics-reader ClusterRole only: its token reads /metrics and nothing
	// else, so handing it to a Prometheus (through ScraperTokenSecret, key token) grants no more.
	ScraperServiceAccount = "quartet-operator-metrics-scraper"
	ScraperTokenSecret    = "quartet-operator-scraper-token"
	// MetricsCAConfigMap holds (key ca.crt) the CA of the metrics certificate the manager issues itself.
	MetricsCAConfigMap = "quartet-operator-metrics-ca"
)

// ConfigMapKey names a key of a ConfigMap.
type ConfigMapKey struct{ Name, Key string }

// OpenShiftServiceCA is the ConfigMap OpenShift puts in every namespace with the service CA, which signs the
// certificates of Services annotated service.beta.openshift.io/serving-cert-secret-name.
var OpenShiftServiceCA = ConfigMapKey{Name: "openshift-service-ca.crt", Key: "service-ca.crt"}

// Render is Objects with the manager's ServiceMonitor verifying the Service's name in namespace and, when ca is
// set, trusting ca instead of MetricsCAConfigMap.
func Render(namespace string, labels map[string]string, ca *ConfigMapKey) ([]*unstructured.Unstructured, error) {
	objects, err := Objects(namespace, labels)
	if err != nil {
		return nil, err
	}
	for _, u := range objects {
		if u.GetKind() != "ServiceMonitor" || u.GetName() != ManagerMonitorName {
			continue
		}
		endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
		for i := range endpoints {
			e := endpoints[i].(map[string]any)
			if err := unstructured.SetNestedField(e, MetricsServiceName+"."+namespace+".svc", "tlsConfig", "serverName"); err != nil {
				return nil, err
			}
			if ca != nil {
				ref := map[string]any{"configMap": map[string]any{"name": ca.Name, "key": ca.Key}}
				if err := unstructured.SetNestedMap(e, ref, "tlsConfig", "ca"); err != nil {
					return nil, err
				}
			}
		}
		if err := unstructured.SetNestedSlice(u.Object, endpoints, "spec", "endpoints"); err != nil {
			return nil, err
		}
	}
	return objects, nil
}
