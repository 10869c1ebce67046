package operator

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	gnmiccontrollers "github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
	gnmicwebhooks "github.com/quartet-dev/quartet-operator/internal/webhook/gnmic"
)

// gnmicControllers are the controllers of the operator.gnmic.dev group.
func gnmicControllers() []Controller {
	return []Controller{
		{
			Name: gnmiccontrollers.TargetControllerName, Group: "gnmic",
			Reads: []Kind{"gnmic/Target", "gnmic/TargetProfile"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&gnmiccontrollers.TargetReconciler{
					Client:   mgr.GetClient(),
					Recorder: mgr.GetEventRecorder(gnmiccontrollers.TargetControllerName),
				}).SetupWithManager(ctx, mgr, d.options(gnmiccontrollers.TargetControllerName))
			},
		},
		{
			Name: gnmiccontrollers.TargetProfileControllerName, Group: "gnmic",
			Reads: []Kind{"gnmic/TargetProfile", "gnmic/Target"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&gnmiccontrollers.TargetProfileReconciler{
					Client:    mgr.GetClient(),
					APIReader: mgr.GetAPIReader(),
					Recorder:  mgr.GetEventRecorder(gnmiccontrollers.TargetProfileControllerName),
				}).SetupWithManager(ctx, mgr, d.options(gnmiccontrollers.TargetProfileControllerName))
			},
		},
		{
			Name: gnmiccontrollers.TargetSourceControllerName, Group: "gnmic",
			Reads: []Kind{"gnmic/TargetSource", "gnmic/Target"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				mapper, err := targetsource.NewMapper()
				if err != nil {
					return err
				}
				r := &gnmiccontrollers.TargetSourceReconciler{
					Client:    mgr.GetClient(),
					APIReader: mgr.GetAPIReader(),
					Recorder:  mgr.GetEventRecorder(gnmiccontrollers.TargetSourceControllerName),
					Mapper:    mapper,
					Clock:     d.Clock,
				}
				if err := r.SetupWithManager(ctx, mgr, d.options(gnmiccontrollers.TargetSourceControllerName)); err != nil {
					return err
				}
				if d.APIBindAddress == "" {
					return nil
				}
				return mgr.Add(&gnmiccontrollers.RefreshServer{
					Addr: d.APIBindAddress, Client: mgr.GetClient(), Secrets: mgr.GetAPIReader(), Clock: d.Clock,
				})
			},
		},
	}
}

// gnmicWebhooks are the admission webhooks of the operator.gnmic.dev group.
func gnmicWebhooks() []Webhook {
	return []Webhook{
		{Kind: "gnmic/Target", Setup: gnmicwebhooks.SetupTargetWebhook},
		{Kind: "gnmic/TargetProfile", Setup: gnmicwebhooks.SetupTargetProfileWebhook},
		{Kind: "gnmic/TargetSource", Setup: gnmicwebhooks.SetupTargetSourceWebhook},
	}
}
