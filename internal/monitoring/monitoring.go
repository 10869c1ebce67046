// Package monitoring lets the manager create its own ServiceMonitors and PrometheusRules, and only where the
// Prometheus Operator's CRDs are served. Shipping them in the OLM bundle made the install fail on every cluster
// without those CRDs (OperatorHub.io's own deploy test among them); the manager instead checks discovery on an
// interval and applies them when the kinds appear, also when the Prometheus Operator is installed later.
package monitoring

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// The operator's namespace gets a Role for these kinds (config/rbac/role.yaml, the CSV's namespaced permissions).
// +kubebuilder:rbac:groups=monitoring.coreos.com,namespace=system,resources=servicemonitors;prometheusrules,verbs=get;create;patch

// GroupVersion is the Prometheus Operator API the objects belong to.
const GroupVersion = "monitoring.coreos.com/v1"

// FieldOwner is the server-side apply manager of the objects.
const FieldOwner = "quartet-operator-monitoring"

//go:embed objects.yaml
var objectsYAML []byte

// Objects returns the embedded objects, placed in namespace and carrying extra labels (for a Prometheus whose
// selectors want them, such as kube-prometheus-stack's `release`).
func Objects(namespace string, labels map[string]string) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(objectsYAML), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("embedded monitoring objects: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		u.SetNamespace(namespace)
		if len(labels) > 0 {
			merged := u.GetLabels()
			if merged == nil {
				merged = map[string]string{}
			}
			for k, v := range labels {
				merged[k] = v
			}
			u.SetLabels(merged)
		}
		out = append(out, u)
	}
	return out, nil
}

// Installer applies the objects whose kinds are served, on start and then every Interval.
type Installer struct {
	Client    client.Client
	Discovery discovery.DiscoveryInterface
	Namespace string
	Labels    map[string]string
	// Interval between checks; zero means one minute.
	Interval time.Duration
	// Timeout bounds one check and its writes; zero means 30 seconds.
	Timeout time.Duration
	// MetricsCA, when set, is the CA the manager's ServiceMonitor trusts instead of MetricsCAConfigMap: the
	// manager sets it to OpenShiftServiceCA when it serves the service CA's certificate.
	MetricsCA *ConfigMapKey
}

// NeedLeaderElection is true: one replica writes.
func (i *Installer) NeedLeaderElection() bool { return true }

// Start checks and applies until ctx ends. A failed check is logged and retried on the next tick: monitoring never
// stops the manager.
func (i *Installer) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("monitoring")
	interval := durationOr(i.Interval, time.Minute)
	for {
		applied, err := i.Sync(ctx)
		if err != nil {
			log.Error(err, "applying the monitoring objects; retrying", "after", interval)
		} else if applied > 0 {
			log.V(1).Info("monitoring objects applied", "count", applied)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// Sync applies every object whose kind the API server serves and returns how many it applied; none when the
// Prometheus Operator's API is not served.
func (i *Installer) Sync(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, durationOr(i.Timeout, 30*time.Second))
	defer cancel()
	served, err := i.servedKinds()
	if err != nil || len(served) == 0 {
		return 0, err
	}
	objects, err := Render(i.Namespace, i.Labels, i.MetricsCA)
	if err != nil {
		return 0, err
	}
	applied := 0
	var errs []error
	for _, u := range objects {
		if !served[u.GetKind()] {
			continue
		}
		err := i.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err))
			continue
		}
		applied++
	}
	return applied, errors.Join(errs...)
}

// servedKinds reads the kinds of GroupVersion from discovery; a group that is not served is no error.
func (i *Installer) servedKinds() (map[string]bool, error) {
	list, err := i.Discovery.ServerResourcesForGroupVersion(GroupVersion)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", GroupVersion, err)
	}
	kinds := map[string]bool{}
	for _, r := range list.APIResources {
		kinds[r.Kind] = true
	}
	return kinds, nil
}

func durationOr(d, fallback time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return fallback
}
