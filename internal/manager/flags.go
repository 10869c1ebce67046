package manager

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// BindFlags registers a flag for every option, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		"Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", o.SecureMetrics,
		"Serve metrics over HTTPS with authentication and authorization (TokenReview/SubjectAccessReview).")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", o.MetricsCertDir,
		"Directory where a mounted metrics certificate (tls.crt, tls.key) is looked for: OpenShift's service CA "+
			"Secret or cert-manager's. One issued by OpenShift's service CA makes the ServiceMonitor trust ConfigMap "+
			"openshift-service-ca.crt.")
	fs.StringVar(&o.MetricsCertSecret, "metrics-cert-secret", o.MetricsCertSecret,
		"Secret (in the pod's namespace) where the manager keeps a metrics CA and serving certificate it generates "+
			"and renews itself, when --metrics-cert-dir holds none; empty leaves controller-runtime's self-signed "+
			"certificate, which no scraper can verify.")
	fs.StringVar(&o.MetricsService, "metrics-service", o.MetricsService,
		"With --metrics-cert-secret: the metrics Service the certificate is issued for (<service>.<namespace>.svc).")
	fs.StringVar(&o.MetricsCAConfigMap, "metrics-ca-configmap", o.MetricsCAConfigMap,
		"With --metrics-cert-secret: ConfigMap (in the pod's namespace) where the manager publishes the metrics CA "+
			"under ca.crt; the ServiceMonitor's tlsConfig.ca names it.")
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
	fs.StringVar(&o.WebhookCertSecret, "webhook-cert-secret", o.WebhookCertSecret,
		"Secret (in the pod's namespace) where the manager keeps a webhook CA and serving certificate it generates and "+
			"renews itself, writing them into --webhook-cert-dir; empty means the certificate comes from elsewhere "+
			"(cert-manager, a Secret you mount).")
	fs.StringVar(&o.WebhookService, "webhook-service", o.WebhookService,
		"With --webhook-cert-secret: the webhook Service the certificate is issued for (<service>.<namespace>.svc).")
	fs.Var(listFlag{&o.WebhookValidatingConfigurations}, "webhook-validating-configurations",
		"With --webhook-cert-secret: comma-separated ValidatingWebhookConfigurations whose webhooks get the generated "+
			"CA as caBundle.")
	fs.Var(listFlag{&o.WebhookMutatingConfigurations}, "webhook-mutating-configurations",
		"With --webhook-cert-secret: comma-separated MutatingWebhookConfigurations whose webhooks get the generated "+
			"CA as caBundle.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2,
		"Allow HTTP/2 on the metrics and webhook servers (off by default: HTTP/2 rapid-reset and stream-cancellation CVEs).")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Client-side queries per second to the API server; a negative value leaves flow control to the server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Client-side burst to the API server.")
	fs.Var(listFlag{&o.Groups}, "groups", "Comma-separated API groups whose controllers run: "+
		strings.Join(operator.Groups, ",")+".")
	fs.Var(listFlag{&o.Controllers}, "controllers",
		"Comma-separated controller names (e.g. gnmic-target) to run; empty runs every controller of the enabled groups.")
	fs.Var(listFlag{&o.PlatformNamespaces}, "gitops-platform-namespaces",
		"Comma-separated namespaces where gitops Platforms are deployed (others report Stalled); empty allows any. A "+
			"Platform's stage ServiceAccounts get cluster-wide rights, and the escalation guard lets stage ServiceAccounts "+
			"run and be bound only in these namespaces.")
	fs.Var(listFlag{&o.GitopsRepositoryAllowCIDRs}, "gitops-repository-allow-cidrs",
		"Comma-separated private prefixes the gitops source stage may fetch repositories from despite its fetch guard "+
			"(passed to every Platform's source stage as --repository-allow-cidrs); loopback, link-local and 0.0.0.0/8 "+
			"cannot be exempted.")
	fs.BoolVar(&o.AllowPrivilegedTenants, "gitops-allow-privileged-tenants", o.AllowPrivilegedTenants,
		"Let a gitops Tenant ask for Pod Security level privileged (spec.podSecurity); refused otherwise, since its "+
			"repository could then run pods with host access.")
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
	fs.DurationVar(&o.TenantQuotaResync, "tenantquota-resync-interval", o.TenantQuotaResync,
		"How often every agentrax TenantQuota's usage and ledger are counted again from the running agents and pods "+
			"when no event brought it back; 0 means 5m.")
	fs.StringVar(&o.GNMIcDefaultImage, "gnmic-default-image", o.GNMIcDefaultImage,
		"Collector image of gnmic Clusters whose spec.image is empty (the installs pass $(RELATED_IMAGE_GNMIC), so "+
			"image mirrors and operator upgrades reach the collectors).")
	fs.StringVar(&o.KatastromaDefaultImage, "katastroma-default-image", o.KatastromaDefaultImage,
		"Stage image of gitops Platforms whose spec.image is empty (the installs pass $(RELATED_IMAGE_KATASTROMA), "+
			"the operator's own image, which ships /katastroma).")
	fs.StringVar(&o.GNMIcClusterDomain, "gnmic-cluster-domain", o.GNMIcClusterDomain,
		"DNS domain of the cluster, in the collector URLs of gnmic Clusters; empty means cluster.local.")
	fs.DurationVar(&o.GNMIcPollInterval, "gnmic-poll-interval", o.GNMIcPollInterval,
		"How often each gnmic collector's targets are polled for their state; 0 means 15s.")
	fs.DurationVar(&o.GNMIcCertificateWait, "gnmic-certificate-wait", o.GNMIcCertificateWait,
		"How long a gnmic Cluster waits for cert-manager to issue a Certificate before reporting CertificateTimedOut; 0 means 5m.")
	fs.DurationVar(&o.GNMIcTargetTLSPropagation, "gnmic-target-tls-propagation", o.GNMIcTargetTLSPropagation,
		"How long a device CA or client certificate newly added to a gnmic Cluster's target-tls Secret is held back before its targets are pushed, so the kubelet has placed the files in the collector pods; 0 means 2m.")
	fs.DurationVar(&o.GNMIcReconnectBackoff, "gnmic-reconnect-backoff", o.GNMIcReconnectBackoff,
		"First backoff before reconnecting to an unreachable gnmic collector (it doubles up to 10s); 0 means 2s.")
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL,
		"Prometheus base URL agentrax canary analysis queries (e.g. http://prometheus.monitoring.svc:9090); empty holds every canary pause as inconclusive.")
	fs.StringVar(&o.PrometheusBearerTokenFile, "prometheus-bearer-token-file", o.PrometheusBearerTokenFile,
		"File whose content is sent as a bearer token with every canary query, re-read each time (on OpenShift the "+
			"manager's ServiceAccount token, /var/run/secrets/kubernetes.io/serviceaccount/token, for the Thanos querier).")
	fs.StringVar(&o.PrometheusCAFile, "prometheus-ca-file", o.PrometheusCAFile,
		"PEM file of the CAs that verify an https --prometheus-url instead of the system's (on OpenShift the service CA, "+
			"e.g. a mounted openshift-service-ca.crt ConfigMap).")
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
			"and both discoveries (on by default: only users a TenantPolicy binds are confined; =false ignores every TenantPolicy).")
	fs.BoolVar(&o.EnforceCrossNamespaceDiscoveryAuthz, "enforce-cross-namespace-discovery-authz", o.EnforceCrossNamespaceDiscoveryAuthz,
		"Admit a discovery whose spec.targetNamespace is another namespace only when a SubjectAccessReview says the "+
			"requester may create the discovered kind there (on by default; =false admits any target namespace).")
	fs.BoolVar(&o.EnforceSecretUseAuthz, "enforce-secret-use-authz", o.EnforceSecretUseAuthz,
		"Admit an ExternalAttributeSync, or a gnmic TargetSource, TargetProfile, Target or Cluster, that names a Secret "+
			"(or ConfigMap, or a profile whose credentials it would send) only when a SubjectAccessReview says the "+
			"requester may get it (on by default; =false skips the check).")
	fs.BoolVar(&o.MonitoringObjects, "monitoring-objects", o.MonitoringObjects,
		"Create the manager's ServiceMonitors and PrometheusRules in its namespace once the Prometheus Operator's CRDs "+
			"are served (checked every minute, so also after they are installed later); =false never.")
	fs.Var((*labelsFlag)(&o.MonitoringLabels), "monitoring-labels", "Labels added to the ServiceMonitors and "+
		"PrometheusRules, as key=value pairs separated by commas (e.g. release=kube-prometheus-stack, for a Prometheus "+
		"that selects by label).")
	fs.BoolVar(&o.EscalationGuard, "escalation-guard", o.EscalationGuard,
		"When running as a ServiceAccount, install the escalation guard (a ValidatingAdmissionPolicy the operator may "+
			"create but never change) and wait until it is enforced before starting; =false only where an administrator "+
			"installs an equivalent policy (docs/install.md, \"Permissions\").")
	fs.DurationVar(&o.FleetDriftInterval, "fleet-drift-interval", o.FleetDriftInterval,
		"How often managed Fleet pipelines are compared with Fleet Management (one ListPipelines call) and any changed "+
			"outside the operator restored from their Pipeline; 0 means 10m, a negative value never.")
	fs.StringVar(&o.FleetClusterID, "fleet-cluster-id", o.FleetClusterID,
		"Identity of this cluster in the ownership marker written into Fleet pipelines' metadata; empty means the "+
			"UID of the kube-system namespace.")
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
		"Default TTL of registry entries (30s-24h); 0 means 90s.")
	fs.DurationVar(&o.RegistryHealthInterval, "registry-health-interval", o.RegistryHealthInterval,
		"Heartbeat interval of registered agents; 0 means TTL/4. Forced to TTL/4 unless 3 intervals plus a probe "+
			"timeout fit in the TTL, so that 3 failed heartbeats deregister an agent before its entry expires.")
	fs.DurationVar(&o.RegistryRelistInterval, "registry-relist-interval", o.RegistryRelistInterval,
		"How often registered agents' tools are listed again (tools/list) without a change of image, port, path "+
			"or declared tools; 0 means 10m, a negative value never.")
	fs.BoolVar(&o.RegistryListenToolChanges, "registry-listen-tool-changes", o.RegistryListenToolChanges,
		"Hold one notification stream per registered agent whose MCP server offers tools.listChanged and list its "+
			"tools again on notifications/tools/list_changed (one open connection per such agent on the leader).")
	fs.StringVar(&o.RegistryTLSCertDir, "registry-tls-cert-dir", o.RegistryTLSCertDir,
		"Directory with tls.crt and tls.key (reloaded when they change) for the registry API, which then serves HTTPS "+
			"only; writes (and their bearer tokens) are accepted only over TLS.")
	fs.StringVar(&o.RegistryCertSecret, "registry-cert-secret", o.RegistryCertSecret,
		"Secret (in the pod's namespace) where the manager keeps a registry CA and serving certificate it generates and "+
			"renews itself, writing them into --registry-tls-cert-dir; empty means the certificate there comes from "+
			"elsewhere (cert-manager, a Secret you mount).")
	fs.StringVar(&o.RegistryService, "registry-service", o.RegistryService,
		"With --registry-cert-secret: the registry Service the certificate is issued for (<service>.<namespace>.svc).")
	fs.StringVar(&o.RegistryCAConfigMap, "registry-ca-configmap", o.RegistryCAConfigMap,
		"With --registry-cert-secret: ConfigMap (in the pod's namespace) where the manager publishes the registry's CA "+
			"under ca.crt, for clients to trust.")
	fs.BoolVar(&o.RegistryPlaintextWrites, "registry-plaintext-writes", o.RegistryPlaintextWrites,
		"Accept registry writes and their bearer tokens over plain HTTP (development only; the tokens cross the network in clear).")
	fs.IntVar(&o.RegistryMaxEntriesPerNamespace, "registry-max-entries-per-namespace", o.RegistryMaxEntriesPerNamespace,
		"Most registry entries one namespace may hold (a registration beyond it answers 507); 0 means 500, a quarter of the registry's 2000.")
	fs.StringVar(&o.RegistryTokenSecret, "registry-token-secret", o.RegistryTokenSecret,
		"namespace/name of a Secret whose key \"token\" authorizes registry writes in every namespace.")
	fs.Var(listFlag{&o.RegistryWriters}, "registry-writers",
		"Comma-separated ServiceAccounts (namespace/name) whose tokens may write registry entries of their own namespace.")
	fs.Var(listFlag{&o.RegistryClusterWriters}, "registry-cluster-writers",
		"Comma-separated ServiceAccounts (namespace/name) whose tokens may write registry entries of every namespace.")
	fs.StringVar(&o.RegistryTokenAudience, "registry-token-audience", o.RegistryTokenAudience,
		"Audience ServiceAccount tokens of registry writers must be issued for; empty accepts API server tokens.")
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

// labelsFlag is a label map as key=value pairs separated by commas, printed sorted.
type labelsFlag map[string]string

func (l *labelsFlag) String() string {
	if l == nil {
		return ""
	}
	pairs := make([]string, 0, len(*l))
	for k, v := range *l {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, ",")
}

func (l *labelsFlag) Set(v string) error {
	labels, err := parseLabels(v)
	if err != nil {
		return err
	}
	*l = labels
	return nil
}

// parseLabels reads key=value pairs separated by commas; each key and value must be a valid label.
func parseLabels(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, pair := range strings.Split(v, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		key, value, ok := strings.Cut(pair, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", pair)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("label key %q: %s", key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return nil, fmt.Errorf("label value %q: %s", value, strings.Join(errs, "; "))
		}
		out[key] = value
	}
	return out, nil
}
