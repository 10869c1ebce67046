// Package shape checks the ServiceMonitors the manager applies against what OpenShift's user-workload monitoring
// accepts, without a control plane: UWM rejects bearerTokenFile (it would read the Prometheus pod's own token) and
// a scrape that skips TLS verification authenticates nothing.
package shape

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/quartet-dev/quartet-operator/internal/monitoring"
)

// managerMonitor returns the manager's ServiceMonitor endpoint among objects.
func managerMonitor(g Gomega, objects []*unstructured.Unstructured) map[string]any {
	for _, u := range objects {
		if u.GetKind() == "ServiceMonitor" && u.GetName() == monitoring.ManagerMonitorName {
			endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
			g.Expect(endpoints).To(HaveLen(1))
			return endpoints[0].(map[string]any)
		}
	}
	g.Expect(objects).To(ContainElement(HaveField("Object", HaveKeyWithValue("metadata",
		HaveKeyWithValue("name", monitoring.ManagerMonitorName)))), "the manager's ServiceMonitor")
	return nil
}

// TestManagerMonitorAuthenticatesAndVerifies: the manager's ServiceMonitor sends the scraper's token from a Secret
// of its own namespace (authorization), and verifies the metrics certificate against the operator's CA ConfigMap
// for the Service's DNS name; no endpoint anywhere uses bearerTokenFile or skips verification.
func TestManagerMonitorAuthenticatesAndVerifies(t *testing.T) {
	g := NewWithT(t)
	objects, err := monitoring.Render("ops", nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	for _, u := range objects {
		endpoints, _, _ := unstructured.NestedSlice(u.Object, "spec", "endpoints")
		for _, e := range endpoints {
			g.Expect(e).NotTo(HaveKey("bearerTokenFile"), "%s %s: user-workload monitoring rejects bearerTokenFile", u.GetKind(), u.GetName())
			g.Expect(e).NotTo(HaveKeyWithValue("tlsConfig", HaveKeyWithValue("insecureSkipVerify", true)),
				"%s %s skips TLS verification", u.GetKind(), u.GetName())
		}
	}
	e := managerMonitor(g, objects)
	g.Expect(e).To(HaveKeyWithValue("scheme", "https"))
	g.Expect(e).To(HaveKeyWithValue("authorization", And(
		HaveKeyWithValue("type", "Bearer"),
		HaveKeyWithValue("credentials", map[string]any{"name": monitoring.ScraperTokenSecret, "key": "token"}))))
	g.Expect(e).To(HaveKeyWithValue("tlsConfig", And(
		HaveKeyWithValue("serverName", monitoring.MetricsServiceName+".ops.svc"),
		HaveKeyWithValue("ca", map[string]any{"configMap": map[string]any{"name": monitoring.MetricsCAConfigMap, "key": "ca.crt"}}))))
}

// TestManagerMonitorTrustsTheServiceCA: where the metrics certificate comes from OpenShift's service CA, the
// ServiceMonitor verifies it with the CA OpenShift publishes in every namespace.
func TestManagerMonitorTrustsTheServiceCA(t *testing.T) {
	g := NewWithT(t)
	objects, err := monitoring.Render("ops", nil, &monitoring.ConfigMapKey{Name: "openshift-service-ca.crt", Key: "service-ca.crt"})
	g.Expect(err).NotTo(HaveOccurred())
	e := managerMonitor(g, objects)
	g.Expect(e).To(HaveKeyWithValue("tlsConfig", And(
		HaveKeyWithValue("serverName", monitoring.MetricsServiceName+".ops.svc"),
		HaveKeyWithValue("ca", map[string]any{"configMap": map[string]any{"name": "openshift-service-ca.crt", "key": "service-ca.crt"}}))))
}
