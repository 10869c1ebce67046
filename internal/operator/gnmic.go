package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
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
					// Inventories are external sources like fleet's: one guard, one --external-source-allow-cidrs.
					Guard:    d.Fleet.guard(),
					WriteQPS: float64(mgr.GetConfig().QPS),
					// Concurrent runs share the writer's rate limiter: each budget is sized for its share.
					WriteSharers: d.Concurrency[gnmiccontrollers.TargetSourceControllerName],
					Clock:        d.Clock,
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
			Reads: []Kind{"gnmic/Cluster", "gnmic/GnmicPipeline", "gnmic/Target", "gnmic/TargetProfile", "gnmic/Subscription",
				"gnmic/Output", "gnmic/Input", "gnmic/Processor", "gnmic/TunnelTargetPolicy"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				collectors := &collector.Client{HTTP: d.PeerDial.HTTPClient()}
				groups, err := apiGroups(mgr)
				if err != nil {
					return err
				}
				return (&gnmiccontrollers.ClusterReconciler{
					Client:       mgr.GetClient(),
					APIReader:    mgr.GetAPIReader(),
					Recorder:     mgr.GetEventRecorder(gnmiccontrollers.ClusterControllerName),
					Collectors:   collectors,
					DefaultImage: d.GNMIc.DefaultImage,
					Monitor: &collector.Monitor{Client: collectors, PollInterval: d.GNMIc.PollInterval,
						BackoffMin: d.GNMIc.ReconnectBackoff},
					ClusterDomain:        d.GNMIc.ClusterDomain,
					OperatorNamespace:    d.GNMIc.OperatorNamespace,
					CertificateWait:      d.GNMIc.CertificateWait,
					TargetTLSPropagation: d.GNMIc.TargetTLSPropagation,
					PlatformAssignsUID:   collector.PlatformAssignsUID(groups),
				}).SetupWithManager(ctx, mgr, d.options(gnmiccontrollers.ClusterControllerName))
			},
		},
		{
			Name: gnmiccontrollers.PipelineControllerName, Group: "gnmic",
			Reads: []Kind{"gnmic/GnmicPipeline", "gnmic/Cluster", "gnmic/Target", "gnmic/TargetProfile", "gnmic/Subscription",
				"gnmic/Output", "gnmic/Input", "gnmic/Processor", "gnmic/TunnelTargetPolicy"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&gnmiccontrollers.PipelineReconciler{
					Client:       mgr.GetClient(),
					Recorder:     mgr.GetEventRecorder(gnmiccontrollers.PipelineControllerName),
					DefaultImage: d.GNMIc.DefaultImage,
				}).SetupWithManager(ctx, mgr, d.options(gnmiccontrollers.PipelineControllerName))
			},
		},
		{
			Name: gnmiccontrollers.CollectorResourceControllerName, Group: "gnmic",
			Reads: []Kind{"gnmic/GnmicPipeline", "gnmic/Subscription", "gnmic/Output", "gnmic/Input", "gnmic/Processor",
				"gnmic/TunnelTargetPolicy"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				return gnmiccontrollers.SetupCollectorResourceControllers(ctx, mgr, d.options(gnmiccontrollers.CollectorResourceControllerName))
			},
		},
	}
}

// GNMIcSettings configure the gnmic Cluster controller (--gnmic-* flags).
type GNMIcSettings struct {
	// PollInterval between polls of each collector's targets; zero means the monitor's default (15s).
	PollInterval time.Duration
	// ReconnectBackoff is the first reconnect backoff of a collector; zero means the monitor's default (2s).
	ReconnectBackoff time.Duration
	// ClusterDomain is the cluster's DNS domain; empty means cluster.local.
	ClusterDomain string
	// DefaultImage is the collector image of Clusters that name none.
	DefaultImage string
	// CertificateWait bounds the wait for a cert-manager Certificate's Secret; zero means 5 minutes.
	CertificateWait time.Duration
	// TargetTLSPropagation is how long newly added device TLS files are held back; zero means 2 minutes.
	TargetTLSPropagation time.Duration
	// OperatorNamespace is the operator's own namespace, the only one whose operator pods may reach the
	// collectors' REST API; empty admits operator pods in any namespace.
	OperatorNamespace string
	// EnforceSecretUseAuthz is --enforce-secret-use-authz: gnmic objects that name Secrets or ConfigMaps, or send
	// a profile's credentials to an address, are admitted only for requesters who may read them.
	EnforceSecretUseAuthz bool
}

// gnmicTrusts holds one requester check per manager, so its own user name is asked once.
var gnmicTrusts sync.Map

// gnmicTrust is the requester check the gnmic webhooks share (--enforce-secret-use-authz).
func gnmicTrust(mgr ctrl.Manager, d Dependencies) *gnmicwebhooks.Trust {
	if t, ok := gnmicTrusts.Load(mgr); ok {
		return t.(*gnmicwebhooks.Trust)
	}
	t, _ := gnmicTrusts.LoadOrStore(mgr, gnmicwebhooks.NewTrust(mgr, d.GNMIc.EnforceSecretUseAuthz))
	return t.(*gnmicwebhooks.Trust)
}

// apiGroups asks discovery, once at start, which API groups the cluster serves.
func apiGroups(mgr ctrl.Manager) ([]string, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	groups, err := dc.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("discovering API groups: %w", err)
	}
	names := make([]string, 0, len(groups.Groups))
	for _, g := range groups.Groups {
		names = append(names, g.Name)
	}
	return names, nil
}

// gnmicWebhooks are the admission webhooks of the operator.gnmic.dev group.
func gnmicWebhooks() []Webhook {
	return []Webhook{
		{Kind: "gnmic/Target", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return gnmicwebhooks.SetupTargetWebhook(mgr, gnmicTrust(mgr, d))
		}},
		{Kind: "gnmic/TargetProfile", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return gnmicwebhooks.SetupTargetProfileWebhook(mgr, gnmicTrust(mgr, d))
		}},
		{Kind: "gnmic/TargetSource", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return gnmicwebhooks.SetupTargetSourceWebhook(mgr, gnmicTrust(mgr, d), d.Fleet.guard())
		}},
		{Kind: "gnmic/Cluster", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return gnmicwebhooks.SetupClusterWebhook(mgr, gnmicTrust(mgr, d))
		}},
		{Kind: "gnmic/GnmicPipeline", Setup: gnmicwebhooks.SetupPipelineWebhook},
		{Kind: "gnmic/Subscription", Setup: gnmicwebhooks.SetupSubscriptionWebhook},
		{Kind: "gnmic/Output", Setup: gnmicwebhooks.SetupOutputWebhook},
		{Kind: "gnmic/Input", Setup: gnmicwebhooks.SetupInputWebhook},
		{Kind: "gnmic/Processor", Setup: gnmicwebhooks.SetupProcessorWebhook},
		{Kind: "gnmic/TunnelTargetPolicy", Setup: gnmicwebhooks.SetupTunnelTargetPolicyWebhook},
	}
}
