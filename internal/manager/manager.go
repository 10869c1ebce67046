// Package manager builds the controller-runtime manager from the operator's options. cmd/main.go, `make dev` and
// the envtest harness all go through New, so what the tests run is what ships.
package manager

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/quartet-dev/quartet-operator/internal/netguard"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/registry"
)

// Options are the manager's settings; every field has a flag.
type Options struct {
	MetricsBindAddress     string
	SecureMetrics          bool
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof; empty (the default) disables it.
	PprofBindAddress string

	LeaderElect             bool
	LeaderElectionID        string
	LeaderElectionNamespace string

	EnableWebhooks bool
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	EnableHTTP2    bool

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
	// PrometheusURL is where agentrax canary analysis queries Prometheus; empty leaves canaries unjudged (held).
	PrometheusURL string
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
	// RegistryTTL is the default entry TTL; zero means AGENTRAX_REGISTRY_TTL, else 90s.
	RegistryTTL            time.Duration
	RegistryHealthInterval time.Duration
	RegistryTokenSecret    string
	RegistryWriters        []string
	RegistryClusterWriters []string
	RegistryTokenAudience  string
	RegistryHostMap        string
	// RegistrySweepInterval and RegistryListening are for tests (no flag): a shorter sweep, and the bound
	// address of the registry API when it binds port 0.
	RegistrySweepInterval time.Duration
	RegistryListening     func(addr string)

	// SkipControllerNameValidation lets a process build more than one manager with the same controllers (tests
	// that restart the manager).
	SkipControllerNameValidation bool
}

// DefaultOptions returns the settings of a production deployment.
func DefaultOptions() Options {
	return Options{
		MetricsBindAddress:         ":8443",
		SecureMetrics:              true,
		HealthProbeBindAddress:     ":8081",
		LeaderElectionID:           "quartet-operator.quartet.dev",
		EnableWebhooks:             true,
		WebhookPort:                9443,
		KubeAPIQPS:                 50,
		KubeAPIBurst:               100,
		TargetSourceConcurrency:    4,
		AgentDeploymentConcurrency: 4,
		Groups:                     append([]string(nil), operator.Groups...),
		GPUResourceName:            "nvidia.com/gpu",
		PrometheusFailsafeTimeout:  60 * time.Second,
		CanaryAnalysisInterval:     10 * time.Second,
		FleetAPIRPS:                3,
		FleetAPIBurst:              50,
		PipelineNameScope:          "none",
		PolicyConcurrency:          4,
		SyncConcurrency:            4,
		DiscoveryConcurrency:       1,
		// On by default: without it anyone allowed to create a discovery could fill any namespace with CRs.
		EnforceCrossNamespaceDiscoveryAuthz: true,
		SyncTargetRate:                      1,
		SyncTargetBurst:                     5,
		RegistryBindAddress:                 ":9090",
		RegistryTokenAudience:               "agentrax-registry",
	}
}

// BindFlags registers a flag for every option, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", o.SecureMetrics,
		"Serve metrics over HTTPS with authentication and authorization (TokenReview/SubjectAccessReview).")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		"Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		"Address net/http/pprof binds to (profiling); empty disables it. Bind it to loopback: it is not authenticated.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Elect a leader so that only one replica runs the controllers (webhooks run on every replica).")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"Namespace of the leader election Lease; empty uses the pod's namespace.")
	fs.BoolVar(&o.EnableWebhooks, "enable-webhooks", o.EnableWebhooks, "Serve the admission webhooks.")
	fs.StringVar(&o.WebhookHost, "webhook-host", o.WebhookHost, "Address the webhook server binds to; empty means all.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Port of the webhook server.")
	fs.StringVar(&o.WebhookCertDir, "webhook-cert-dir", o.WebhookCertDir,
		"Directory with tls.crt and tls.key for the webhook server; empty uses controller-runtime's default.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2,
		"Allow HTTP/2 on the metrics and webhook servers (off by default: HTTP/2 rapid-reset and stream-cancellation CVEs).")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Client-side queries per second to the API server; a negative value leaves flow control to the server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst to the API server.")
	fs.Var(listFlag{&o.Groups}, "groups", "Comma-separated API groups whose controllers run: "+
		strings.Join(operator.Groups, ",")+".")
	fs.Var(listFlag{&o.Controllers}, "controllers",
		"Comma-separated controller names (e.g. gnmic-target) to run; empty runs every controller of the enabled groups.")
	fs.Var(listFlag{&o.WatchNamespaces}, "watch-namespaces",
		"Comma-separated namespaces to watch; empty watches all namespaces.")
	fs.StringVar(&o.APIBindAddress, "api-bind-address", o.APIBindAddress,
		"Address of the operator's HTTP API (TargetSource refresh), served by every replica; empty disables it.")
	fs.IntVar(&o.TargetSourceConcurrency, "targetsource-concurrency", o.TargetSourceConcurrency,
		"How many TargetSources are reconciled at once.")
	fs.IntVar(&o.AgentDeploymentConcurrency, "agentdeployment-concurrency", o.AgentDeploymentConcurrency,
		"How many AgentDeployments are reconciled at once (each reconcile is a few sequential API calls).")
	fs.StringVar(&o.GPUResourceName, "gpu-resource-name", o.GPUResourceName,
		"Extended resource counted as GPUs against agentrax TenantQuota maxGPUs (limits[name] × replicas.max).")
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL,
		"Prometheus base URL agentrax canary analysis queries (e.g. http://prometheus.monitoring.svc:9090); empty holds every canary pause as inconclusive.")
	fs.DurationVar(&o.PrometheusFailsafeTimeout, "prometheus-failsafe-timeout", o.PrometheusFailsafeTimeout,
		"How long Prometheus may stay unreachable during a canary pause before the canary is rolled back.")
	fs.DurationVar(&o.CanaryAnalysisInterval, "canary-analysis-interval", o.CanaryAnalysisInterval,
		"How often a canary pause re-evaluates the canary against Prometheus.")
	fs.StringVar(&o.FleetCredentialsSecret, "fleet-credentials-secret", o.FleetCredentialsSecret,
		"namespace/name of the Secret with the Fleet Management API base-url, username and password (optional ca.crt).")
	fs.StringVar(&o.FleetAPIURL, "fleet-api-url", o.FleetAPIURL,
		"Fleet Management API URL (https); overrides the Secret's base-url.")
	fs.Float64Var(&o.FleetAPIRPS, "fleet-api-rps", o.FleetAPIRPS,
		"Fleet Management API requests per second, one token bucket shared by every fleet controller.")
	fs.IntVar(&o.FleetAPIBurst, "fleet-api-burst", o.FleetAPIBurst, "Fleet Management API token bucket burst.")
	fs.StringVar(&o.PipelineNameScope, "pipeline-name-scope", o.PipelineNameScope,
		"How Pipeline CRs map to org-global Fleet pipeline names: none (spec.name or metadata.name; same-named "+
			"CRs in two namespaces are reported as a NameCollision) or namespace (\"<namespace>.<name>\").")
	fs.IntVar(&o.PolicyConcurrency, "controller-policy-max-concurrent", o.PolicyConcurrency,
		"How many RemoteAttributePolicies are reconciled at once.")
	fs.IntVar(&o.SyncConcurrency, "controller-sync-max-concurrent", o.SyncConcurrency,
		"How many ExternalAttributeSyncs are reconciled (run) at once.")
	fs.IntVar(&o.DiscoveryConcurrency, "controller-discovery-max-concurrent", o.DiscoveryConcurrency,
		"How many PipelineDiscoveries and CollectorDiscoveries (each) are polled at once.")
	fs.BoolVar(&o.EnforceTenantPolicies, "enable-tenant-policy-enforcement", o.EnforceTenantPolicies,
		"Enforce TenantPolicies at admission for Pipelines, Collectors, RemoteAttributePolicies, ExternalAttributeSyncs "+
			"and both discoveries.")
	fs.BoolVar(&o.EnforceCrossNamespaceDiscoveryAuthz, "enforce-cross-namespace-discovery-authz", o.EnforceCrossNamespaceDiscoveryAuthz,
		"Admit a discovery whose spec.targetNamespace is another namespace only when a SubjectAccessReview says the "+
			"requester may create the discovered kind there (on by default; =false admits any target namespace).")
	fs.Float64Var(&o.SyncTargetRate, "controller-sync-target-rate", o.SyncTargetRate,
		"Requests per second to any one ExternalAttributeSync HTTP host (a token bucket per host).")
	fs.IntVar(&o.SyncTargetBurst, "controller-sync-target-burst", o.SyncTargetBurst,
		"Burst of the per-host token bucket of ExternalAttributeSync HTTP sources.")
	fs.Var(listFlag{&o.ExternalSourceAllowCIDRs}, "external-source-allow-cidrs",
		"Comma-separated network prefixes ExternalAttributeSync HTTP and SQL sources may reach although the SSRF guard "+
			"blocks them (private ranges such as 10.20.0.0/16 for an in-cluster inventory); loopback, link-local "+
			"(cloud metadata) and 0.0.0.0/8 cannot be exempted.")
	fs.StringVar(&o.RegistryBindAddress, "registry-bind-address", o.RegistryBindAddress,
		"Address of the agentrax MCP discovery registry API, served by every replica; \"0\" or empty disables the registry.")
	fs.StringVar(&o.RegistryNamespace, "registry-namespace", o.RegistryNamespace,
		"Namespace of ConfigMap agentrax-registry; empty means POD_NAMESPACE, else the pod's own namespace.")
	fs.DurationVar(&o.RegistryTTL, "registry-ttl", o.RegistryTTL,
		"Default TTL of registry entries (30s-24h); 0 means "+RegistryTTLEnv+", else 90s.")
	fs.DurationVar(&o.RegistryHealthInterval, "registry-health-interval", o.RegistryHealthInterval,
		"Heartbeat interval of registered agents; 0 means TTL/4. Forced to TTL/4 unless 3 intervals plus a probe "+
			"timeout fit in the TTL, so that 3 failed heartbeats deregister an agent before its entry expires.")
	fs.StringVar(&o.RegistryTokenSecret, "registry-token-secret", o.RegistryTokenSecret,
		"namespace/name of a Secret whose key \"token\" authorizes registry writes in every namespace.")
	fs.Var(listFlag{&o.RegistryWriters}, "registry-writers",
		"Comma-separated ServiceAccounts (namespace/name) whose tokens may write registry entries of their own namespace.")
	fs.Var(listFlag{&o.RegistryClusterWriters}, "registry-cluster-writers",
		"Comma-separated ServiceAccounts (namespace/name) whose tokens may write registry entries of every namespace.")
	fs.StringVar(&o.RegistryTokenAudience, "registry-token-audience", o.RegistryTokenAudience,
		"Audience ServiceAccount tokens of registry writers must be issued for; empty accepts API server tokens.")
	fs.StringVar(&o.RegistryHostMap, "registry-host-map", o.RegistryHostMap,
		"Maps agents' service hosts to other addresses for local runs: \"name.ns.svc:port=host:port,...\" and/or "+
			"\"*=127.0.0.1\" (every service host to that host, same port). Not for production.")
}

// RegistryTTLEnv sets the registry's default TTL when --registry-ttl is not given.
const RegistryTTLEnv = "AGENTRAX_REGISTRY_TTL"

// registrySettings resolves the registry options: the TTL from the environment, the namespace from the pod,
// the host map from its flag form.
func (o *Options) registrySettings() (operator.RegistrySettings, error) {
	s := operator.RegistrySettings{
		BindAddress: o.RegistryBindAddress, Namespace: o.RegistryNamespace, TTL: o.RegistryTTL,
		HealthInterval: o.RegistryHealthInterval, SweepInterval: o.RegistrySweepInterval,
		TokenSecret: o.RegistryTokenSecret, Writers: o.RegistryWriters, ClusterWriters: o.RegistryClusterWriters,
		TokenAudience: o.RegistryTokenAudience, Listening: o.RegistryListening,
	}
	if !s.Enabled() {
		return s, nil
	}
	if s.TTL == 0 {
		if v := os.Getenv(RegistryTTLEnv); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return s, fmt.Errorf("%s=%q: %w", RegistryTTLEnv, v, err)
			}
			s.TTL = d
		}
	}
	if _, err := s.EffectiveTTL(); err != nil {
		return s, err
	}
	if s.Namespace == "" {
		s.Namespace = podNamespace(o.LeaderElectionNamespace)
	}
	hosts, err := registry.ParseHostMap(o.RegistryHostMap)
	if err != nil {
		return s, fmt.Errorf("--registry-host-map: %w", err)
	}
	s.HostMap = hosts
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

// listFlag is a comma-separated string list flag.
type listFlag struct{ values *[]string }

func (l listFlag) String() string {
	if l.values == nil {
		return ""
	}
	return strings.Join(*l.values, ",")
}

func (l listFlag) Set(s string) error {
	*l.values = nil
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l.values = append(*l.values, v)
		}
	}
	return nil
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
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
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
		ReservedNamespaces: slices.DeleteFunc([]string{podNamespace(o.LeaderElectionNamespace)}, func(s string) bool { return s == "" }),
		Clock:              o.Clock,
		GPUResourceName:    o.GPUResourceName,
		Canary: operator.CanarySettings{PrometheusURL: o.PrometheusURL, FailsafeTimeout: o.PrometheusFailsafeTimeout,
			AnalysisInterval: o.CanaryAnalysisInterval},
		Fleet: operator.FleetSettings{
			CredentialsSecret: o.FleetCredentialsSecret, APIURL: o.FleetAPIURL,
			RPS: o.FleetAPIRPS, Burst: o.FleetAPIBurst, PipelineNameScope: o.PipelineNameScope,
			SyncTargetRate: o.SyncTargetRate, SyncTargetBurst: o.SyncTargetBurst,
			SSRFAllow: externalAllow, SSRFAllowForTesting: o.SSRFAllowForTesting,
			EnforceTenantPolicies: o.EnforceTenantPolicies, EnforceCrossNamespaceDiscoveryAuthz: o.EnforceCrossNamespaceDiscoveryAuthz,
		},
		Registry: registrySettings,
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
