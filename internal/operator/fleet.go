package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetcontrollers "github.com/quartet-dev/quartet-operator/controllers/fleet"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	fleetwebhooks "github.com/quartet-dev/quartet-operator/internal/webhook/fleet"
)

// FleetSettings configure the Fleet Management API client shared by the fleet controllers.
type FleetSettings struct {
	// CredentialsSecret is namespace/name of the Secret with base-url, username, password (and optional ca.crt).
	CredentialsSecret string
	// APIURL overrides the Secret's base-url.
	APIURL string
	// RPS and Burst size the one token bucket every fleet controller shares.
	RPS   float64
	Burst int
	// PipelineNameScope is none or namespace.
	PipelineNameScope string
}

// fleetProviders holds one client provider per manager, so every fleet controller of a manager shares one token
// bucket.
var fleetProviders sync.Map

func fleetProvider(mgr ctrl.Manager, s FleetSettings) (*fleetclient.Provider, error) {
	if p, ok := fleetProviders.Load(mgr); ok {
		return p.(*fleetclient.Provider), nil
	}
	var secret types.NamespacedName
	if s.CredentialsSecret != "" {
		ns, name, ok := strings.Cut(s.CredentialsSecret, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--fleet-credentials-secret %q: want namespace/name", s.CredentialsSecret)
		}
		secret = types.NamespacedName{Namespace: ns, Name: name}
	}
	if s.APIURL != "" {
		if _, err := fleetclient.NormalizeBaseURL(s.APIURL); err != nil {
			return nil, fmt.Errorf("--fleet-api-url: %w", err)
		}
	}
	p := fleetclient.NewProvider(mgr.GetAPIReader(), fleetclient.ProviderOptions{
		Secret: secret, URL: s.APIURL, RPS: s.RPS, Burst: s.Burst,
	})
	actual, _ := fleetProviders.LoadOrStore(mgr, p)
	return actual.(*fleetclient.Provider), nil
}

func nameScope(s FleetSettings) (string, error) {
	switch s.PipelineNameScope {
	case "", fleetv1alpha1.NameScopeNone:
		return fleetv1alpha1.NameScopeNone, nil
	case fleetv1alpha1.NameScopeNamespace:
		return fleetv1alpha1.NameScopeNamespace, nil
	}
	return "", fmt.Errorf("--pipeline-name-scope %q: want none or namespace", s.PipelineNameScope)
}

// fleetControllers are the controllers of the fleetmanagement.grafana.com group.
func fleetControllers() []Controller {
	return []Controller{
		{
			Name: fleetcontrollers.PipelineControllerName, Group: "fleet",
			Reads: []Kind{"fleet/Pipeline"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				provider, err := fleetProvider(mgr, d.Fleet)
				if err != nil {
					return err
				}
				scope, err := nameScope(d.Fleet)
				if err != nil {
					return err
				}
				return (&fleetcontrollers.PipelineReconciler{
					Client:    mgr.GetClient(),
					Recorder:  mgr.GetEventRecorder(fleetcontrollers.PipelineControllerName),
					Fleet:     provider,
					NameScope: scope,
				}).SetupWithManager(ctx, mgr)
			},
		},
		{
			Name: fleetcontrollers.CollectorControllerName, Group: "fleet",
			Reads: []Kind{"fleet/Collector"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				provider, err := fleetProvider(mgr, d.Fleet)
				if err != nil {
					return err
				}
				return (&fleetcontrollers.CollectorReconciler{
					Client:   mgr.GetClient(),
					Recorder: mgr.GetEventRecorder(fleetcontrollers.CollectorControllerName),
					Fleet:    provider,
				}).SetupWithManager(ctx, mgr)
			},
		},
	}
}

// fleetWebhooks are the admission webhooks of the fleetmanagement.grafana.com group.
func fleetWebhooks() []Webhook {
	return []Webhook{
		{Kind: "fleet/Pipeline", Setup: fleetwebhooks.SetupPipelineWebhook},
		{Kind: "fleet/Collector", Setup: fleetwebhooks.SetupCollectorWebhook},
	}
}
