package operator

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	gitopscontrollers "github.com/quartet-dev/quartet-operator/controllers/gitops"
	gitopswebhooks "github.com/quartet-dev/quartet-operator/internal/webhook/gitops"
)

// gitopsControllers are the controllers of the katastroma.org group.
func gitopsControllers() []Controller {
	return []Controller{
		{
			Name: gitopscontrollers.PlatformControllerName, Group: "gitops",
			Reads: []Kind{"gitops/Platform"},
			Setup: func(_ context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&gitopscontrollers.PlatformReconciler{
					Client:               mgr.GetClient(),
					Recorder:             mgr.GetEventRecorder(gitopscontrollers.PlatformControllerName),
					AllowedNamespaces:    d.PlatformNamespaces,
					DefaultImage:         d.KatastromaDefaultImage,
					MonitoringLabels:     d.MonitoringLabels,
					RepositoryAllowCIDRs: d.GitopsRepositoryAllow,
				}).SetupWithManager(mgr, d.options(gitopscontrollers.PlatformControllerName))
			},
		},
		{
			Name: gitopscontrollers.TenantControllerName, Group: "gitops",
			Reads: []Kind{"gitops/Tenant"},
			Setup: func(_ context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&gitopscontrollers.TenantReconciler{
					Client:          mgr.GetClient(),
					APIReader:       mgr.GetAPIReader(),
					Recorder:        mgr.GetEventRecorder(gitopscontrollers.TenantControllerName),
					Reserved:        d.ReservedNamespaces,
					AllowPrivileged: d.AllowPrivilegedTenants,
				}).SetupWithManager(mgr, d.options(gitopscontrollers.TenantControllerName))
			},
		},
	}
}

// gitopsWebhooks are the admission webhooks of the katastroma.org group.
func gitopsWebhooks() []Webhook {
	return []Webhook{
		{Kind: "gitops/Tenant", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return gitopswebhooks.SetupTenantWebhook(mgr, d.AllowPrivilegedTenants, d.ReservedNamespaces...)
		}},
	}
}
