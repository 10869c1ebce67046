// Package operator wires the four groups' controllers and webhooks into one manager: the scheme, the registry of
// controllers and the kinds they read, and the selection made by the manager's flags.
package operator

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// NewScheme returns a scheme with the built-in Kubernetes kinds, the third-party kinds the operator manages
// (Gateway API routes, prometheus-operator monitors and rules) and every kind this operator serves.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(gatewayv1.Install(s))
	utilruntime.Must(monitoringv1.AddToScheme(s))
	utilruntime.Must(fleetv1alpha1.AddToScheme(s))
	utilruntime.Must(gnmicv1alpha1.AddToScheme(s))
	utilruntime.Must(agentraxv1alpha1.AddToScheme(s))
	utilruntime.Must(gitopsv1alpha1.AddToScheme(s))
	return s
}
