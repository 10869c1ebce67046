package operator

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetcontrollers "github.com/quartet-dev/quartet-operator/controllers/fleet"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/extsync"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
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
	// SyncTargetRate and SyncTargetBurst size the per-host limiter of ExternalAttributeSync HTTP sources.
	SyncTargetRate  float64
	SyncTargetBurst int
	// SSRFAllow are the administrator's exemptions (--external-source-allow-cidrs), already checked with
	// netguard.CheckAllowedPrefix.
	SSRFAllow []netip.Prefix
	// SSRFAllowForTesting exempts prefixes from the SSRF guard (tests only).
	SSRFAllowForTesting []netip.Prefix
	// EnforceTenantPolicies is --enable-tenant-policy-enforcement.
	EnforceTenantPolicies bool
	// EnforceCrossNamespaceDiscoveryAuthz is --enforce-cross-namespace-discovery-authz.
	EnforceCrossNamespaceDiscoveryAuthz bool
	// EnforceSecretUseAuthz is --enforce-secret-use-authz.
	EnforceSecretUseAuthz bool
	// ClusterID is --fleet-cluster-id; empty means the kube-system namespace's UID.
	ClusterID string
	// DriftInterval is --fleet-drift-interval.
	DriftInterval time.Duration
	// NameTakenRetry is the first wait of a Pipeline whose name another Pipeline of this cluster holds (tests only).
	NameTakenRetry time.Duration
}

// clusterID is the cluster identity of the pipeline ownership marker: the flag, else the UID of kube-system,
// which is fixed for the life of a cluster and differs between clusters sharing one Fleet stack.
func clusterID(ctx context.Context, mgr ctrl.Manager, s FleetSettings) (string, error) {
	if s.ClusterID != "" {
		return s.ClusterID, nil
	}
	ns := &corev1.Namespace{}
	if err := mgr.GetAPIReader().Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading the kube-system namespace for the cluster identity (or set --fleet-cluster-id): %w", err)
	}
	return string(ns.UID), nil
}

// tenancy is the per-user admission checks every fleet webhook shares.
func (s FleetSettings) tenancy(mgr ctrl.Manager) *fleetwebhooks.Tenancy {
	return &fleetwebhooks.Tenancy{
		Policies: mgr.GetClient(), Namespaces: mgr.GetAPIReader(), Reviews: mgr.GetClient(),
		EnforcePolicies: s.EnforceTenantPolicies, EnforceCrossNamespace: s.EnforceCrossNamespaceDiscoveryAuthz,
		EnforceSecretUse:  s.EnforceSecretUseAuthz,
		PipelineNameScope: s.PipelineNameScope,
		PipelineMatchers: func(ctx context.Context, name string) ([]string, bool, error) {
			return admissionLookup(ctx, mgr, s, func(fc *fleetclient.Client) ([]string, error) {
				id, err := fc.GetPipelineID(ctx, name)
				if err != nil {
					return nil, err
				}
				fp, err := fc.GetPipeline(ctx, id)
				return fp.GetMatchers(), err
			})
		},
		Collectors: func(ctx context.Context, id string) (map[string]string, bool, error) {
			return admissionLookup(ctx, mgr, s, func(fc *fleetclient.Client) (map[string]string, error) {
				col, err := fc.GetCollector(ctx, id)
				if err != nil {
					return nil, err
				}
				attrs := maps.Clone(col.GetLocalAttributes())
				if attrs == nil {
					attrs = map[string]string{}
				}
				maps.Copy(attrs, col.GetRemoteAttributes())
				return attrs, nil
			})
		},
	}
}

// admissionLookup runs one Fleet read of an admission check with the webhooks' own client (and token bucket):
// found is false, without error, when Fleet answers not_found; a 401 drops the cached client, so the next
// admission reads the rotated credentials Secret.
func admissionLookup[T any](ctx context.Context, mgr ctrl.Manager, s FleetSettings, read func(*fleetclient.Client) (T, error)) (out T, found bool, err error) {
	p, err := admissionProvider(mgr, s)
	if err != nil {
		return out, false, err
	}
	fc, err := p.Client(ctx)
	if err != nil {
		return out, false, err
	}
	got, err := read(fc)
	switch {
	case fleetclient.IsNotFound(err):
		return out, false, nil
	case err != nil:
		if fleetclient.IsUnauthenticated(err) {
			p.Invalidate()
		}
		return out, false, err
	}
	return got, true, nil
}

// guard is the SSRF guard of the sync controller and webhook.
func (s FleetSettings) guard() *netguard.Guard {
	return netguard.New(netguard.AllowPrefixes(s.SSRFAllow...), netguard.AllowPrefixesForTesting(s.SSRFAllowForTesting...))
}

// fleetProviders holds one client provider per manager, so every fleet controller of a manager shares one token
// bucket.
var fleetProviders sync.Map

// Admission's own Fleet budget: a webhook answers within its 10 s timeout only if it never queues behind the
// controllers' bucket (a reconcile storm can empty it for minutes). Fleet therefore sees at most --fleet-api-rps
// plus AdmissionRPS.
const (
	AdmissionRPS   = 1
	AdmissionBurst = 10
)

// admissionProviders holds the webhooks' client provider per manager, with its own token bucket.
var admissionProviders sync.Map

func admissionProvider(mgr ctrl.Manager, s FleetSettings) (*fleetclient.Provider, error) {
	if p, ok := admissionProviders.Load(mgr); ok {
		return p.(*fleetclient.Provider), nil
	}
	s.RPS, s.Burst = AdmissionRPS, AdmissionBurst
	p, err := newFleetProvider(mgr, s)
	if err != nil {
		return nil, err
	}
	actual, _ := admissionProviders.LoadOrStore(mgr, p)
	return actual.(*fleetclient.Provider), nil
}

func fleetProvider(mgr ctrl.Manager, s FleetSettings) (*fleetclient.Provider, error) {
	if p, ok := fleetProviders.Load(mgr); ok {
		return p.(*fleetclient.Provider), nil
	}
	p, err := newFleetProvider(mgr, s)
	if err != nil {
		return nil, err
	}
	actual, _ := fleetProviders.LoadOrStore(mgr, p)
	return actual.(*fleetclient.Provider), nil
}

func newFleetProvider(mgr ctrl.Manager, s FleetSettings) (*fleetclient.Provider, error) {
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
	return fleetclient.NewProvider(mgr.GetAPIReader(), fleetclient.ProviderOptions{
		Secret: secret, URL: s.APIURL, RPS: s.RPS, Burst: s.Burst,
	}), nil
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
			// PipelineDiscoveries are read to tell whether a read-only Pipeline's discovery still refreshes it.
			Reads: []Kind{"fleet/Pipeline", "fleet/PipelineDiscovery"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				provider, err := fleetProvider(mgr, d.Fleet)
				if err != nil {
					return err
				}
				scope, err := nameScope(d.Fleet)
				if err != nil {
					return err
				}
				cluster, err := clusterID(ctx, mgr, d.Fleet)
				if err != nil {
					return err
				}
				return (&fleetcontrollers.PipelineReconciler{
					Client:         mgr.GetClient(),
					Recorder:       mgr.GetEventRecorder(fleetcontrollers.PipelineControllerName),
					Fleet:          provider,
					NameScope:      scope,
					Cluster:        cluster,
					DriftInterval:  d.Fleet.DriftInterval,
					NameTakenRetry: d.Fleet.NameTakenRetry,
				}).SetupWithManager(ctx, mgr)
			},
		},
		{
			Name: fleetcontrollers.CollectorControllerName, Group: "fleet",
			// The policy and sync webhooks are served whenever the Collector controller runs, because it reads
			// both kinds (upstream served the policy webhook only with the policy controller).
			Reads: []Kind{"fleet/Collector", "fleet/RemoteAttributePolicy", "fleet/ExternalAttributeSync"},
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
		{
			Name: fleetcontrollers.RemoteAttributePolicyControllerName, Group: "fleet",
			Reads: []Kind{"fleet/RemoteAttributePolicy", "fleet/Collector"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				return (&fleetcontrollers.RemoteAttributePolicyReconciler{
					Client:                  mgr.GetClient(),
					Recorder:                mgr.GetEventRecorder(fleetcontrollers.RemoteAttributePolicyControllerName),
					MaxConcurrentReconciles: d.Concurrency[fleetcontrollers.RemoteAttributePolicyControllerName],
				}).SetupWithManager(ctx, mgr)
			},
		},
		{
			Name: fleetcontrollers.ExternalAttributeSyncControllerName, Group: "fleet",
			Reads: []Kind{"fleet/ExternalAttributeSync", "fleet/Collector"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				rps, burst := d.Fleet.SyncTargetRate, d.Fleet.SyncTargetBurst
				if rps <= 0 {
					rps = 1
				}
				guard := d.Fleet.guard()
				return (&fleetcontrollers.ExternalAttributeSyncReconciler{
					Client:                  mgr.GetClient(),
					APIReader:               mgr.GetAPIReader(),
					Recorder:                mgr.GetEventRecorder(fleetcontrollers.ExternalAttributeSyncControllerName),
					HTTP:                    extsync.NewHTTPSource(guard, nil, rps, burst),
					SQL:                     extsync.SQLOptions{Dial: guard.DialContext},
					Clock:                   d.Clock,
					MaxConcurrentReconciles: d.Concurrency[fleetcontrollers.ExternalAttributeSyncControllerName],
				}).SetupWithManager(ctx, mgr)
			},
		},
		{
			Name: fleetcontrollers.PipelineDiscoveryControllerName, Group: "fleet",
			Reads: []Kind{"fleet/PipelineDiscovery", "fleet/Pipeline"},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				provider, err := fleetProvider(mgr, d.Fleet)
				if err != nil {
					return err
				}
				cluster, err := clusterID(ctx, mgr, d.Fleet)
				if err != nil {
					return err
				}
				return (&fleetcontrollers.PipelineDiscoveryReconciler{
					Cluster:                 cluster,
					Client:                  mgr.GetClient(),
					APIReader:               mgr.GetAPIReader(),
					Poller:                  fleetcontrollers.Poller{Recorder: mgr.GetEventRecorder(fleetcontrollers.PipelineDiscoveryControllerName), Clock: d.Clock},
					Fleet:                   provider,
					MaxConcurrentReconciles: d.Concurrency[fleetcontrollers.PipelineDiscoveryControllerName],
				}).SetupWithManager(ctx, mgr)
			},
		},
		{
			Name: fleetcontrollers.CollectorDiscoveryControllerName, Group: "fleet",
			Reads: []Kind{"fleet/CollectorDiscovery", "fleet/Collector"},
			// The discovery only creates Collector CRs; without the Collector controller nothing would act on them.
			Requires: []string{fleetcontrollers.CollectorControllerName},
			Setup: func(ctx context.Context, mgr ctrl.Manager, d Dependencies) error {
				provider, err := fleetProvider(mgr, d.Fleet)
				if err != nil {
					return err
				}
				return (&fleetcontrollers.CollectorDiscoveryReconciler{
					Client:                  mgr.GetClient(),
					APIReader:               mgr.GetAPIReader(),
					Poller:                  fleetcontrollers.Poller{Recorder: mgr.GetEventRecorder(fleetcontrollers.CollectorDiscoveryControllerName), Clock: d.Clock},
					Fleet:                   provider,
					MaxConcurrentReconciles: d.Concurrency[fleetcontrollers.CollectorDiscoveryControllerName],
				}).SetupWithManager(ctx, mgr)
			},
		},
		{
			Name: fleetcontrollers.TenantPolicyControllerName, Group: "fleet",
			Reads: []Kind{"fleet/TenantPolicy"},
			Setup: func(_ context.Context, mgr ctrl.Manager, _ Dependencies) error {
				return (&fleetcontrollers.TenantPolicyReconciler{
					Client:   mgr.GetClient(),
					Recorder: mgr.GetEventRecorder(fleetcontrollers.TenantPolicyControllerName),
				}).SetupWithManager(mgr)
			},
		},
	}
}

// fleetWebhooks are the admission webhooks of the fleetmanagement.grafana.com group.
func fleetWebhooks() []Webhook {
	return []Webhook{
		{Kind: "fleet/Pipeline", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return fleetwebhooks.SetupPipelineWebhook(mgr, d.Fleet.tenancy(mgr))
		}},
		{Kind: "fleet/Collector", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return fleetwebhooks.SetupCollectorWebhook(mgr, d.Fleet.tenancy(mgr))
		}},
		{Kind: "fleet/RemoteAttributePolicy", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return fleetwebhooks.SetupRemoteAttributePolicyWebhook(mgr, d.Fleet.tenancy(mgr))
		}},
		{Kind: "fleet/ExternalAttributeSync", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return fleetwebhooks.SetupExternalAttributeSyncWebhook(mgr, d.Fleet.guard(), d.Fleet.tenancy(mgr))
		}},
		{Kind: "fleet/PipelineDiscovery", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return fleetwebhooks.SetupPipelineDiscoveryWebhook(mgr, d.Fleet.tenancy(mgr))
		}},
		{Kind: "fleet/CollectorDiscovery", SetupWithDeps: func(mgr ctrl.Manager, d Dependencies) error {
			return fleetwebhooks.SetupCollectorDiscoveryWebhook(mgr, d.Fleet.tenancy(mgr))
		}},
		{Kind: "fleet/TenantPolicy", Setup: fleetwebhooks.SetupTenantPolicyWebhook},
	}
}
