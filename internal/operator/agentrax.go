package operator

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	agentraxcontrollers "github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
	agentraxwebhooks "github.com/quartet-dev/quartet-operator/internal/webhook/agentrax"
)

// agentraxControllers are the controllers of the agentrax.io group.
func agentraxControllers() []Controller {
	return []Controller{
		{
			Name: agentraxcontrollers.AgentDeploymentControllerName, Group: "agentrax",
			Reads: []Kind{"agentrax/AgentDeployment", "agentrax/TenantQuota"},
			// Quota admission reserves only on ledgers the TenantQuota controller has built and settles.
			Requires: []string{agentraxcontrollers.TenantQuotaControllerName},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				registrar, err := agentRegistrar(mgr, d.Registry, d.PeerDial)
				if err != nil {
					return err
				}
				canary, err := canaryConfig(mgr, d)
				if err != nil {
					return err
				}
				return (&agentraxcontrollers.AgentDeploymentReconciler{
					Client:      mgr.GetClient(),
					Recorder:    mgr.GetEventRecorder(agentraxcontrollers.AgentDeploymentControllerName),
					Registrar:   registrar,
					GPUResource: gpuResource(d),
					Canary:      canary,
				}).SetupWithManager(ctx, mgr, d.options(agentraxcontrollers.AgentDeploymentControllerName))
			},
		},
		{
			Name: agentraxcontrollers.TenantQuotaControllerName, Group: "agentrax",
			Reads: []Kind{"agentrax/TenantQuota", "agentrax/AgentDeployment"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&agentraxcontrollers.TenantQuotaReconciler{
					Client:         mgr.GetClient(),
					APIReader:      mgr.GetAPIReader(),
					Recorder:       mgr.GetEventRecorder(agentraxcontrollers.TenantQuotaControllerName),
					GPUResource:    gpuResource(d),
					ResyncInterval: d.QuotaResync,
				}).SetupWithManager(ctx, mgr, d.options(agentraxcontrollers.TenantQuotaControllerName))
			},
		},
	}
}

// CanarySettings configure agentrax canary analysis.
type CanarySettings struct {
	// PrometheusURL is Prometheus's base URL; empty means none (canary pauses stay inconclusive).
	PrometheusURL string
	// FailsafeTimeout is how long Prometheus may be unreachable during a pause before rollback.
	FailsafeTimeout time.Duration
	// AnalysisInterval is how often a pause re-evaluates the canary.
	AnalysisInterval time.Duration
	// BearerTokenFile is sent as a bearer token with every query (OpenShift's Thanos querier needs one).
	BearerTokenFile string
	// CAFile holds the PEM CAs that verify an https PrometheusURL instead of the system's (e.g. OpenShift's
	// service CA).
	CAFile string
}

func canaryConfig(mgr ctrl.Manager, d Dependencies) (agentraxcontrollers.CanaryConfig, error) {
	c := agentraxcontrollers.CanaryConfig{FailsafeTimeout: d.Canary.FailsafeTimeout,
		AnalysisInterval: d.Canary.AnalysisInterval, APIReader: mgr.GetAPIReader(), Clock: d.Clock}
	if d.Canary.PrometheusURL == "" {
		return c, nil
	}
	p, err := rollout.NewPrometheus(d.Canary.PrometheusURL, d.Canary.BearerTokenFile, d.Canary.CAFile, d.PeerDial.Transport())
	if err != nil {
		return c, err
	}
	c.Prometheus = p
	return c, nil
}

func gpuResource(d Dependencies) corev1.ResourceName {
	if d.GPUResourceName == "" {
		return "nvidia.com/gpu"
	}
	return corev1.ResourceName(d.GPUResourceName)
}

// agentraxWebhooks are the admission webhooks of the agentrax.io group. Every webhook of the operator, agentrax's
// included, is served by the manager's one webhook server (--webhook-port, 9443 by default).
func agentraxWebhooks() []Webhook {
	return []Webhook{
		{Kind: "agentrax/AgentDeployment", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return agentraxwebhooks.SetupAgentDeploymentWebhook(mgr, gpuResource(d))
		}},
	}
}
