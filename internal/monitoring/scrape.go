package monitoring

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The scraper's ServiceAccount and its token Secret live in the operator's namespace; the Secret rights come with
// internal/webhookcert's marker, and the metrics CA ConfigMap is written by the metrics certificate (webhookcert's
// CAConfigMap). The ClusterRoleBinding to metrics-reader is shipped (config/prometheus/metrics_reader_binding.yaml):
// the manager cannot bind roles.
// +kubebuilder:rbac:groups="",namespace=system,resources=serviceaccounts,verbs=get;create
// +kubebuilder:rbac:groups="",namespace=system,resources=configmaps,verbs=get;create;update

// Names of the manager's ServiceMonitor and of what its scrape uses, as config/prometheus writes them.
const (
	ManagerMonitorName = "quartet-operator-controller-manager-metrics-monitor"
	MetricsServiceName = "quartet-operator-controller-manager-metrics-service"
	// ScraperServiceAccount is bound to the metrics-reader ClusterRole only: its token reads /metrics and nothing
	// else, so handing it to a Prometheus (through ScraperTokenSecret) grants no more.
	ScraperServiceAccount = "quartet-operator-metrics-scraper"
	ScraperTokenSecret    = "quartet-operator-metrics-scraper-token"
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

// ensureScraper creates the scraper's ServiceAccount and its token Secret (the token controller fills in the
// token) when they are missing; existing ones are left alone, so a rotated token stays.
func ensureScraper(ctx context.Context, r client.Reader, c client.Client, namespace string) error {
	labels := map[string]string{"app.kubernetes.io/name": "quartet-operator", "app.kubernetes.io/managed-by": "quartet-operator"}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ScraperServiceAccount, Labels: labels}}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ScraperTokenSecret, Labels: labels,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: ScraperServiceAccount}},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	for _, obj := range []client.Object{sa, secret} {
		err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			err = c.Create(ctx, obj)
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		}
		if err != nil {
			return fmt.Errorf("metrics scraper %T %s/%s: %w", obj, namespace, obj.GetName(), err)
		}
	}
	return nil
}
