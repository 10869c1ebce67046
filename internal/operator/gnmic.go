package operator

import (
	"context"
	"net/http"
	"os"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	gnmiccontrollers "github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/collector"
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
				writer, err := gnmiccontrollers.NewTargetWriter(mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetScheme())
				if err != nil {
					return err
				}
				r := &gnmiccontrollers.TargetSourceReconciler{
					Client:    mgr.GetClient(),
					APIReader: mgr.GetAPIReader(),
					Writer:    writer,
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
					Namespaces: d.WatchNamespaces,
				})
			},
		},
		{
			Name: gnmiccontrollers.ClusterControllerName, Group: "gnmic",
			Reads: []Kind{"gnmic/Cluster", "gnmic/Pipeline", "gnmic/Target", "gnmic/TargetProfile", "gnmic/Subscription",
				"gnmic/Output", "gnmic/Input", "gnmic/Processor", "gnmic/TunnelTargetPolicy"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				collectors := &collector.Client{HTTP: &http.Client{}}
				return (&gnmiccontrollers.ClusterReconciler{
					Client:           mgr.GetClient(),
					APIReader:        mgr.GetAPIReader(),
					Recorder:         mgr.GetEventRecorder(gnmiccontrollers.ClusterControllerName),
					Collectors:       collectors,
					Monitor:          &collector.Monitor{Client: collectors, PollInterval: envDuration("QUARTET_GNMIC_POLL_INTERVAL"), BackoffMin: envDuration("QUARTET_GNMIC_RECONNECT_BACKOFF")},
					AllowURLOverride: os.Getenv("QUARTET_GNMIC_COLLECTOR_URL_OVERRIDE") == "true",
					ClusterDomain:    os.Getenv("QUARTET_GNMIC_CLUSTER_DOMAIN"),
				}).SetupWithManager(ctx, mgr, d.options(gnmiccontrollers.ClusterControllerName))
			},
		},
		{
			Name: gnmiccontrollers.PipelineControllerName, Group: "gnmic",
			Reads: []Kind{"gnmic/Pipeline", "gnmic/Cluster", "gnmic/Target", "gnmic/TargetProfile", "gnmic/Subscription",
				"gnmic/Output", "gnmic/Input", "gnmic/Processor", "gnmic/TunnelTargetPolicy"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&gnmiccontrollers.PipelineReconciler{
					Client:   mgr.GetClient(),
					Recorder: mgr.GetEventRecorder(gnmiccontrollers.PipelineControllerName),
				}).SetupWithManager(ctx, mgr, d.options(gnmiccontrollers.PipelineControllerName))
			},
		},
	}
}

// envDuration reads a duration tuning knob of the gnmic collector controllers; unset or invalid means default.
// QUARTET_GNMIC_COLLECTOR_URL_OVERRIDE=true lets the operator.gnmic.dev/collector-urls Cluster annotation point
// pushes at other URLs (tests and make dev only).
func envDuration(name string) time.Duration {
	d, err := time.ParseDuration(os.Getenv(name))
	if err != nil {
		return 0
	}
	return d
}

// gnmicWebhooks are the admission webhooks of the operator.gnmic.dev group.
func gnmicWebhooks() []Webhook {
	return []Webhook{
		{Kind: "gnmic/Target", Setup: gnmicwebhooks.SetupTargetWebhook},
		{Kind: "gnmic/TargetProfile", Setup: gnmicwebhooks.SetupTargetProfileWebhook},
		{Kind: "gnmic/TargetSource", Setup: gnmicwebhooks.SetupTargetSourceWebhook},
		{Kind: "gnmic/Cluster", Setup: gnmicwebhooks.SetupClusterWebhook},
		{Kind: "gnmic/Pipeline", Setup: gnmicwebhooks.SetupPipelineWebhook},
		{Kind: "gnmic/Subscription", Setup: gnmicwebhooks.SetupSubscriptionWebhook},
		{Kind: "gnmic/Output", Setup: gnmicwebhooks.SetupOutputWebhook},
		{Kind: "gnmic/Input", Setup: gnmicwebhooks.SetupInputWebhook},
		{Kind: "gnmic/Processor", Setup: gnmicwebhooks.SetupProcessorWebhook},
		{Kind: "gnmic/TunnelTargetPolicy", Setup: gnmicwebhooks.SetupTunnelTargetPolicyWebhook},
	}
}
