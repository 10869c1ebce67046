// Package manager builds the controller-runtime manager from the operator's options. cmd/main.go, `make dev` and
// the envtest harness all go through New, so what the tests run is what ships.
package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/quartet-dev/quartet-operator/internal/devdial"
	"github.com/quartet-dev/quartet-operator/internal/guard"
	"github.com/quartet-dev/quartet-operator/internal/monitoring"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/webhookcert"
)

// Options are the manager's settings; every field has a flag.
type Options struct {
	MetricsBindAddress     string
	SecureMetrics          bool
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof; empty (the default) disables it.
	PprofBindAddress string

	// MetricsCertDir is where a mounted metrics certificate is looked for (OpenShift's service CA Secret, or
	// cert-manager's). Without one there, MetricsCertSecret makes the manager issue its own (internal/webhookcert),
	// for the Service MetricsService, and publish the CA in ConfigMap MetricsCAConfigMap (metricscert.go).
	MetricsCertDir     string
	MetricsCertSecret  string
	MetricsService     string
	MetricsCAConfigMap string

	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string

	EnableWebhooks bool
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// WebhookCertSecret, when set, makes the manager generate and renew its own webhook certificate, kept in this
	// Secret of the pod's namespace (internal/webhookcert); WebhookService and Webhook*Configurations name the
	// Service the certificate is for and the webhook configurations whose caBundle it fills.
	WebhookCertSecret               string
	WebhookService                  string
	WebhookValidatingConfigurations []string
	WebhookMutatingConfigurations   []string
	EnableHTTP2                     bool

	KubeAPIQPS   float64
	KubeAPIBurst int

	Groups          []string
	Controllers     []string
	WatchNamespaces []string

	// APIBindAddress is the operator's own HTTP API (TargetSource refresh), served by every replica; empty
	// disables it.
	APIBindAddress string
	// TargetSourceConcurrency is MaxConcurrentReconciles of the gnmic-targetsource controller.
	TargetSourceConcurrency int
	// AgentDeploymentConcurrency is MaxConcurrentReconciles of the agentrax-agentdeployment controller.
	AgentDeploymentConcurrency int
	// Clock, when set, is the time source of controllers that accept one (tests only; no flag).
	Clock clock.PassiveClock
	// GPUResourceName is the extended resource agentrax counts against TenantQuota maxGPUs.
	GPUResourceName string
	// GNMIc* configure the gnmic Cluster controller's collector follow-up (operator.GNMIcSettings).
	GNMIcPollInterval     time.Duration
	GNMIcReconnectBackoff time.Duration
	GNMIcClusterDomain    string
	// GNMIcDefaultImage and KatastromaDefaultImage are the images of gnmic Clusters and gitops Platforms that name
	// none (the installs set them from RELATED_IMAGE_GNMIC and RELATED_IMAGE_KATASTROMA).
	GNMIcDefaultImage      string
	KatastromaDefaultImage string
	GNMIcCertificateWait   time.Duration
	// GNMIcTargetTLSPropagation: see --gnmic-target-tls-propagation.
	GNMIcTargetTLSPropagation time.Duration
	// PrometheusURL is where agentrax canary analysis queries Prometheus; empty leaves canaries unjudged (held).
	PrometheusURL string
	// PrometheusBearerTokenFile and PrometheusCAFile authenticate the queries and verify Prometheus's certificate.
	PrometheusBearerTokenFile string
	PrometheusCAFile          string
	// PrometheusFailsafeTimeout is how long Prometheus may be unreachable during a canary pause before rollback.
	PrometheusFailsafeTimeout time.Duration
	// CanaryAnalysisInterval is how often a canary pause is re-evaluated.
	CanaryAnalysisInterval time.Duration
	// Fleet Management API (fleet group).
	FleetCredentialsSecret string
	FleetAPIURL            string
	FleetAPIRPS            float64
	FleetAPIBurst          int
	PipelineNameScope      string
	// PolicyConcurrency and SyncConcurrency are MaxConcurrentReconciles of the RemoteAttributePolicy and
	// ExternalAttributeSync controllers.
	PolicyConcurrency int
	SyncConcurrency   int
	// DiscoveryConcurrency is MaxConcurrentReconciles of the PipelineDiscovery and CollectorDiscovery controllers.
	DiscoveryConcurrency int
	// EnforceTenantPolicies turns on TenantPolicy admission for the fleet kinds.
	EnforceTenantPolicies bool
	// EnforceCrossNamespaceDiscoveryAuthz makes discovery admission check, with a SubjectAccessReview, that the
	// requester may create the discovered kind in spec.targetNamespace.
	EnforceCrossNamespaceDiscoveryAuthz bool
	// EnforceSecretUseAuthz makes admission of a fleet or gnmic CR that names a Secret (or ConfigMap) check, with a
	// SubjectAccessReview, that the requester may get it; for gnmic also Targets and TargetSources that send a
	// profile's credentials to an address.
	EnforceSecretUseAuthz bool
	// PlatformNamespaces, when set, are the only namespaces where gitops Platforms are deployed.
	PlatformNamespaces []string
	// MonitoringObjects makes the manager apply its ServiceMonitors and PrometheusRules (package monitoring) in its
	// namespace whenever the Prometheus Operator's CRDs are served, with MonitoringLabels added.
	MonitoringObjects bool
	MonitoringLabels  map[string]string
	// AllowPrivilegedTenants lets a gitops Tenant ask for Pod Security level privileged.
	AllowPrivilegedTenants bool
	// GitopsRepositoryAllowCIDRs are private ranges the administrator exempts from the gitops source stage's
	// repository fetch guard; the Platform controller passes them on (--repository-allow-cidrs).
	GitopsRepositoryAllowCIDRs []string
	// EscalationGuard makes the manager, when it runs as a ServiceAccount, install its escalation guard (package
	// guard) and wait until the API server enforces it before any controller starts.
	EscalationGuard bool
	// FleetClusterID identifies this cluster in the ownership marker of Fleet pipelines; empty means the UID of
	// the kube-system namespace.
	FleetClusterID string
	// FleetDriftInterval is how often managed Fleet pipelines are compared with Fleet and repaired; 0 means 10m,
	// a negative value never.
	FleetDriftInterval time.Duration
	// FleetNameTakenRetry is the first wait of a Pipeline refused because another Pipeline of this cluster holds
	// its Fleet name (doubling from there to 5m); 0 means 10s (tests only; no flag).
	FleetNameTakenRetry time.Duration
	// SyncTargetRate and SyncTargetBurst size the per-host rate limiter of ExternalAttributeSync HTTP sources.
	SyncTargetRate  float64
	SyncTargetBurst int
	// ExternalSourceAllowCIDRs are private ranges the administrator exempts from the SSRF guard of
	// ExternalAttributeSync sources (HTTP and SQL), e.g. an in-cluster inventory database's network.
	ExternalSourceAllowCIDRs []string
	// SSRFAllowForTesting exempts address prefixes from the SSRF guard, loopback included (tests only; no flag).
	SSRFAllowForTesting []netip.Prefix

	// Agentrax MCP discovery registry (docs/mcp-registry.md). RegistryBindAddress "" or "0" disables it.
	RegistryBindAddress string
	// RegistryNamespace holds ConfigMap agentrax-registry; empty means POD_NAMESPACE, else the in-cluster
	// ServiceAccount's namespace, else the leader election namespace.
	RegistryNamespace string
	// RegistryTTL is the default entry TTL; zero means 90s.
	RegistryTTL            time.Duration
	RegistryHealthInterval time.Duration
	// RegistryRelistInterval is how often registered agents' tools are listed again (0: 10m, <0: never).
	RegistryRelistInterval time.Duration
	// RegistryListenToolChanges keeps one notification stream per agent whose server offers
	// tools.listChanged and re-lists on each announcement.
	RegistryListenToolChanges bool
	// RegistryTLSCertDir holds tls.crt/tls.key: the registry API then serves HTTPS. RegistryPlaintextWrites
	// accepts writes over plain HTTP (development only).
	RegistryTLSCertDir      string
	RegistryPlaintextWrites bool
	// RegistryCertSecret, when set, makes the manager generate and renew the registry's certificate itself, kept in
	// this Secret of the pod's namespace and written into RegistryTLSCertDir (internal/webhookcert); RegistryService
	// names the Service it is for and RegistryCAConfigMap the ConfigMap its CA is published in.
	RegistryCertSecret  string
	RegistryService     string
	RegistryCAConfigMap string
	// RegistryMaxEntriesPerNamespace caps one namespace's registry entries (0: registry.DefaultMaxEntriesPerNamespace).
	RegistryMaxEntriesPerNamespace int
	// TenantQuotaResync is how often every TenantQuota is counted again without an event (0: 5m).
	TenantQuotaResync      time.Duration
	RegistryTokenSecret    string
	RegistryWriters        []string
	RegistryClusterWriters []string
	RegistryTokenAudience  string
	// RegistrySweepInterval and RegistryListening are for tests (no flag): a shorter sweep, and the bound
	// address of the registry API when it binds port 0.
	RegistrySweepInterval time.Duration
	RegistryListening     func(addr string)

	// DevDialMap, when set, is the map of in-cluster peer addresses to local ones (tests and an in-process
	// `make dev` only; no flag): QUARTET_DEV_DIAL_MAP's entries are added to it. See internal/devdial.
	DevDialMap *devdial.Map

	// SkipControllerNameValidation lets a process build more than one manager with the same controllers (tests
	// that restart the manager).
	SkipControllerNameValidation bool
}

// DefaultOptions returns the settings of a production deployment.
func DefaultOptions() Options {
	return Options{
		MetricsBindAddress:         ":8443",
		SecureMetrics:              true,
		MetricsCertDir:             DefaultMetricsCertDir,
		MetricsService:             monitoring.MetricsServiceName,
		MetricsCAConfigMap:         monitoring.MetricsCAConfigMap,
		HealthProbeBindAddress:     ":8081",
		LeaderElectionID:           "quartet-operator.quartet.dev",
		EnableWebhooks:             true,
		EscalationGuard:            true,
		MonitoringObjects:          true,
		WebhookPort:                9443,
		KubeAPIQPS:                 50,
		KubeAPIBurst:               100,
		TargetSourceConcurrency:    4,
		AgentDeploymentConcurrency: 4,
		Groups:                     append([]string(nil), operator.Groups...),
		GPUResourceName:            "nvidia.com/gpu",
		// The collector the samples and docs run; the installs override it with RELATED_IMAGE_GNMIC.
		GNMIcDefaultImage:         "ghcr.io/openconfig/gnmic:0.47.0",
		PrometheusFailsafeTimeout: 60 * time.Second,
		CanaryAnalysisInterval:    10 * time.Second,
		FleetAPIRPS:               3,
		FleetAPIBurst:             50,
		PipelineNameScope:         "none",
		PolicyConcurrency:         4,
		SyncConcurrency:           4,
		DiscoveryConcurrency:      1,
		// On by default: without it anyone allowed to create a discovery could fill any namespace with CRs.
		EnforceCrossNamespaceDiscoveryAuthz: true,
		EnforceSecretUseAuthz:               true,
		// On by default: a TenantPolicy confines only the users it binds, so with no TenantPolicy nothing changes,
		// and one that exists is never silently ignored.
		EnforceTenantPolicies:     true,
		SyncTargetRate:            1,
		SyncTargetBurst:           5,
		RegistryBindAddress:       ":9090",
		RegistryTokenAudience:     "agentrax-registry",
		RegistryListenToolChanges: true,
	}
}

// registrySettings resolves the registry options: the namespace from the pod.
func (o *Options) registrySettings() (operator.RegistrySettings, error) {
	s := operator.RegistrySettings{
		BindAddress: o.RegistryBindAddress, Namespace: o.RegistryNamespace, TTL: o.RegistryTTL,
		HealthInterval: o.RegistryHealthInterval, SweepInterval: o.RegistrySweepInterval, RelistInterval: o.RegistryRelistInterval,
		ListenToolChanges: o.RegistryListenToolChanges, MaxEntriesPerNamespace: o.RegistryMaxEntriesPerNamespace,
		TLSCertDir: o.RegistryTLSCertDir, PlaintextWrites: o.RegistryPlaintextWrites,
		TokenSecret: o.RegistryTokenSecret, Writers: o.RegistryWriters, ClusterWriters: o.RegistryClusterWriters,
		TokenAudience: o.RegistryTokenAudience, Listening: o.RegistryListening,
	}
	if !s.Enabled() {
		return s, nil
	}
	if _, err := s.EffectiveTTL(); err != nil {
		return s, err
	}
	if s.Namespace == "" {
		s.Namespace = podNamespace(o.LeaderElectionNamespace)
	}
	return s, nil
}

// podNamespace is the operator's own namespace: POD_NAMESPACE (the downward API), else the mounted
// ServiceAccount's namespace, else fallback.
func podNamespace(fallback string) string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return fallback
}

// ParseExternalSourceAllowCIDRs parses --external-source-allow-cidrs, refusing ranges that may never be
// exempted from the SSRF guard.
func ParseExternalSourceAllowCIDRs(cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err == nil {
			err = netguard.CheckAllowedPrefix(p)
		}
		if err != nil {
			return nil, fmt.Errorf("--external-source-allow-cidrs: %q: %w", c, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// New builds a manager with the selected controllers and the webhooks of the kinds they read.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	controllers, err := operator.Selection{Groups: o.Groups, Controllers: o.Controllers}.Resolve()
	if err != nil {
		return nil, err
	}
	registrySettings, err := o.registrySettings()
	if err != nil {
		return nil, err
	}
	externalAllow, err := ParseExternalSourceAllowCIDRs(o.ExternalSourceAllowCIDRs)
	if err != nil {
		return nil, err
	}
	if _, err := netguard.ParseAllowedPrefixes(strings.Join(o.GitopsRepositoryAllowCIDRs, ",")); err != nil {
		return nil, fmt.Errorf("--gitops-repository-allow-cidrs: %w", err)
	}
	peerDial, err := o.peerDial()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(o.KubeAPIQPS), o.KubeAPIBurst

	// Leader election gets a client of its own, so lease renewals never queue behind reconcile traffic in the
	// client-side rate limiter.
	leaderCfg := rest.CopyConfig(cfg)
	leaderCfg.QPS, leaderCfg.Burst = 5, 10

	tlsOpts := []func(*tls.Config){}
	if !o.EnableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: o.MetricsBindAddress, SecureServing: o.SecureMetrics, TLSOpts: tlsOpts}
	if o.SecureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	// Before the metrics server starts: it reads its certificate directory once, then watches the files.
	metricsCert, err := o.ensureMetricsCert(ctx, cfg)
	if err != nil {
		return nil, err
	}
	metricsOpts.CertDir = metricsCert.certDir
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if len(o.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgrOpts := ctrl.Options{
		Scheme:                  operator.NewScheme(),
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		LeaderElectionConfig:    leaderCfg,
		// Stop the controllers at once on shutdown so a successor can take over without waiting for the lease.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		// Secrets are never cached: the few the operator reads are fetched on demand.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	}
	if o.EnableWebhooks {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{
			Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir, TLSOpts: tlsOpts,
		})
	}
	if o.SkipControllerNameValidation {
		skip := true
		mgrOpts.Controller.SkipNameValidation = &skip
	}
	// Before any controller can write with the operator's rights.
	if o.EscalationGuard {
		if err := installGuard(ctx, cfg, mgrOpts.Scheme, o.PlatformNamespaces); err != nil {
			return nil, err
		}
	}
	// Before the manager exists, so the webhook server never starts without its certificate.
	renewer, err := o.ensureWebhookCert(ctx, cfg, mgrOpts.Scheme)
	if err != nil {
		return nil, err
	}
	// Likewise before the registry's listener reads its certificate directory.
	runsRegistry := registrySettings.Enabled() && slices.ContainsFunc(controllers, func(c operator.Controller) bool {
		return c.Name == "agentrax-agentdeployment"
	})
	registryRenewer, err := o.ensureRegistryCert(ctx, cfg, mgrOpts.Scheme, runsRegistry)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if renewer != nil {
		watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: mgrOpts.Scheme})
		if err != nil {
			return nil, err
		}
		keeper := &webhookcert.Keeper{Client: watcher, Config: renewer.Config}
		for _, r := range []manager.Runnable{renewer, keeper} {
			if err := mgr.Add(r); err != nil {
				return nil, err
			}
		}
	}
	if registryRenewer != nil {
		if err := mgr.Add(registryRenewer); err != nil {
			return nil, err
		}
	}
	if o.MonitoringObjects {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return nil, err
		}
		if err := mgr.Add(&monitoring.Installer{Client: mgr.GetClient(), Discovery: dc,
			Namespace: podNamespace(o.LeaderElectionNamespace), Labels: o.MonitoringLabels, MetricsCA: metricsCert.ca}); err != nil {
			return nil, err
		}
	}
	if metricsCert.renewer != nil {
		if err := mgr.Add(metricsCert.renewer); err != nil {
			return nil, err
		}
	}
	deps := operator.Dependencies{
		Concurrency: map[string]int{
			"gnmic-targetsource":          o.TargetSourceConcurrency,
			"agentrax-agentdeployment":    o.AgentDeploymentConcurrency,
			"fleet-remoteattributepolicy": o.PolicyConcurrency,
			"fleet-externalattributesync": o.SyncConcurrency,
			"fleet-pipelinediscovery":     o.DiscoveryConcurrency,
			"fleet-collectordiscovery":    o.DiscoveryConcurrency,
		},
		APIBindAddress:  o.APIBindAddress,
		WatchNamespaces: o.WatchNamespaces,
		// A Tenant owning the operator's namespace could deploy into it with the pipeline's identities.
		PlatformNamespaces:     o.PlatformNamespaces,
		KatastromaDefaultImage: o.KatastromaDefaultImage,
		MonitoringLabels:       o.MonitoringLabels,
		AllowPrivilegedTenants: o.AllowPrivilegedTenants,
		GitopsRepositoryAllow:  o.GitopsRepositoryAllowCIDRs,
		ReservedNamespaces:     slices.DeleteFunc([]string{podNamespace(o.LeaderElectionNamespace)}, func(s string) bool { return s == "" }),
		Clock:                  o.Clock,
		GPUResourceName:        o.GPUResourceName,
		QuotaResync:            o.TenantQuotaResync,
		GNMIc: operator.GNMIcSettings{PollInterval: o.GNMIcPollInterval, ReconnectBackoff: o.GNMIcReconnectBackoff,
			ClusterDomain: o.GNMIcClusterDomain, DefaultImage: o.GNMIcDefaultImage, CertificateWait: o.GNMIcCertificateWait,
			TargetTLSPropagation: o.GNMIcTargetTLSPropagation, EnforceSecretUseAuthz: o.EnforceSecretUseAuthz,
			OperatorNamespace: podNamespace(o.LeaderElectionNamespace)},
		Canary: operator.CanarySettings{PrometheusURL: o.PrometheusURL,
			BearerTokenFile: o.PrometheusBearerTokenFile, CAFile: o.PrometheusCAFile, FailsafeTimeout: o.PrometheusFailsafeTimeout,
			AnalysisInterval: o.CanaryAnalysisInterval},
		Fleet: operator.FleetSettings{
			CredentialsSecret: o.FleetCredentialsSecret, APIURL: o.FleetAPIURL,
			RPS: o.FleetAPIRPS, Burst: o.FleetAPIBurst, PipelineNameScope: o.PipelineNameScope,
			SyncTargetRate: o.SyncTargetRate, SyncTargetBurst: o.SyncTargetBurst,
			SSRFAllow: externalAllow, SSRFAllowForTesting: o.SSRFAllowForTesting,
			EnforceTenantPolicies: o.EnforceTenantPolicies, EnforceCrossNamespaceDiscoveryAuthz: o.EnforceCrossNamespaceDiscoveryAuthz,
			EnforceSecretUseAuthz: o.EnforceSecretUseAuthz, ClusterID: o.FleetClusterID,
			DriftInterval: o.FleetDriftInterval, NameTakenRetry: o.FleetNameTakenRetry,
		},
		Registry: registrySettings,
		PeerDial: peerDial,
	}
	if err := operator.Setup(ctx, mgr, controllers, deps, o.EnableWebhooks); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	ready := healthz.Ping
	if o.EnableWebhooks {
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if err := mgr.AddReadyzCheck("readyz", ready); err != nil {
		return nil, err
	}
	return mgr, nil
}

// installGuard installs the escalation guard for the manager's own identity and waits (30 s at most) until the
// API server enforces it. An identity that is not a ServiceAccount (a developer's kubeconfig) gets none: the
// guard confines the installed operator, not its administrators.
func installGuard(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, platformNamespaces []string) error {
	probeCfg := rest.CopyConfig(cfg)
	probeCfg.UserAgent = guard.ProbeUserAgent
	c, err := client.New(probeCfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	user, err := guard.Whoami(ctx, c)
	if err != nil {
		return fmt.Errorf("escalation guard: %w", err)
	}
	ns, _, isServiceAccount := guard.ServiceAccountUser(user)
	if !isServiceAccount {
		ctrl.Log.WithName("guard").Info("not running as a ServiceAccount: no escalation guard installed", "user", user)
		return nil
	}
	if err := guard.Install(ctx, c, guard.Options{User: user, PlatformNamespaces: platformNamespaces}); err != nil {
		return fmt.Errorf("escalation guard: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	err = wait.PollUntilContextCancel(waitCtx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = guard.Enforced(ctx, c, ns)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("escalation guard: not enforced after 30s: %w", last)
	}
	return nil
}

// ensureWebhookCert generates or reuses the self-managed webhook certificate when --webhook-cert-secret is set,
// and returns the Renewer that keeps it current; nil when the certificate comes from elsewhere.
func (o *Options) ensureWebhookCert(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (*webhookcert.Renewer, error) {
	if !o.EnableWebhooks || o.WebhookCertSecret == "" {
		return nil, nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	certCfg := webhookcert.Config{
		SecretName: o.WebhookCertSecret, Namespace: podNamespace(o.LeaderElectionNamespace),
		Service: o.WebhookService, CertDir: o.WebhookCertDir,
		ValidatingConfigurations: o.WebhookValidatingConfigurations, MutatingConfigurations: o.WebhookMutatingConfigurations,
	}
	next, err := webhookcert.Ensure(ctx, c, certCfg, time.Now())
	if err != nil {
		return nil, err
	}
	return &webhookcert.Renewer{Client: c, Config: certCfg, Next: next}, nil
}

// ensureRegistryCert generates or reuses the registry's self-managed certificate when --registry-cert-secret is set
// and the registry runs (with the AgentDeployment controller), publishes its CA, and returns the Renewer that keeps
// both current; nil otherwise.
func (o *Options) ensureRegistryCert(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, runsRegistry bool) (*webhookcert.Renewer, error) {
	if o.RegistryCertSecret == "" || !runsRegistry {
		return nil, nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	certCfg := webhookcert.Config{
		SecretName: o.RegistryCertSecret, Namespace: podNamespace(o.LeaderElectionNamespace),
		Service: o.RegistryService, CertDir: o.RegistryTLSCertDir, CAConfigMap: o.RegistryCAConfigMap,
		Purpose: "mcp-registry",
		Flags:   webhookcert.Flags{Secret: "--registry-cert-secret", Service: "--registry-service", CertDir: "--registry-tls-cert-dir"},
	}
	next, err := webhookcert.Ensure(ctx, c, certCfg, time.Now())
	if err != nil {
		return nil, err
	}
	return &webhookcert.Renewer{Client: c, Config: certCfg, Next: next}, nil
}
