// Package platform renders what a Platform deploys: per stage a ServiceAccount, Deployment, Service,
// NetworkPolicy and (pipeline stages) PodDisruptionBudget, the stages' RBAC and the OTel Collector routing
// ConfigMap. It is pure: the controller writes what it returns.
package platform

import (
	"fmt"
	"path"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// Ports every stage serves.
const (
	GRPCPort     = 50051
	WebhookPort  = 8080
	MetricsPort  = 9090
	OTLPGRPCPort = 4317
	OTLPHTTPPort = 4318
)

// Stages lists the pipeline stages in order, then pharos.
var Stages = []string{gitopsv1alpha1.StageSource, gitopsv1alpha1.StageRenderer, gitopsv1alpha1.StageOrderer,
	gitopsv1alpha1.StageLabeler, gitopsv1alpha1.StageProvisioner, gitopsv1alpha1.StagePruner, gitopsv1alpha1.StagePharos}

// next is the stage each one streams to; callers are who may open connections to it (NetworkPolicy ingress).
var (
	next = map[string]string{
		gitopsv1alpha1.StageSource: gitopsv1alpha1.StageRenderer, gitopsv1alpha1.StageRenderer: gitopsv1alpha1.StageOrderer,
		gitopsv1alpha1.StageOrderer: gitopsv1alpha1.StageLabeler, gitopsv1alpha1.StageLabeler: gitopsv1alpha1.StageProvisioner,
		gitopsv1alpha1.StageProvisioner: gitopsv1alpha1.StagePruner,
	}
	callers = map[string][]string{
		gitopsv1alpha1.StageSource:      {gitopsv1alpha1.StagePharos}, // Replay
		gitopsv1alpha1.StageRenderer:    {gitopsv1alpha1.StageSource},
		gitopsv1alpha1.StageOrderer:     {gitopsv1alpha1.StageRenderer, gitopsv1alpha1.StagePruner},
		gitopsv1alpha1.StageLabeler:     {gitopsv1alpha1.StageOrderer},
		gitopsv1alpha1.StageProvisioner: {gitopsv1alpha1.StageLabeler},
		gitopsv1alpha1.StagePruner:      {gitopsv1alpha1.StageProvisioner},
	}
)

// The binaries' defaults Validate assumes for unset durations (TestValidateDefaultsAreTheBinariesDefaults keeps
// them equal; the CRD defaults leaseStaleAfter and crashTimeout, but an object written before those defaults
// existed, or through a path that skips them, may still lack them).
const (
	DefaultLeaseStaleAfter = 10 * time.Minute // the source handler's --lease-stale-after
	DefaultCrashTimeout    = 12 * time.Minute // pharos's --crash-timeout
	DefaultRPCTimeout      = 5 * time.Minute  // every stage's --rpc-timeout
	DefaultGitTimeout      = 2 * time.Minute  // the source handler's --git-timeout
)

// Validate checks what the schema cannot: messages name the field.
func Validate(p *gitopsv1alpha1.Platform) field.ErrorList {
	var errs field.ErrorList
	if r := p.Spec.Stages.Pharos.Replicas; r != nil && *r > 1 {
		errs = append(errs, field.Invalid(field.NewPath("spec", "stages", "pharos", "replicas"), *r,
			"pharos runs at most one replica: its state ConfigMap has one writer"))
	}
	// Unset durations are the binaries' defaults: the relations hold for what actually runs.
	crash := durationOr(p.Spec.CrashTimeout, DefaultCrashTimeout)
	stale := durationOr(p.Spec.LeaseStaleAfter, DefaultLeaseStaleAfter)
	rpc := durationOr(p.Spec.RPCTimeout, DefaultRPCTimeout)
	git := durationOr(p.Spec.GitTimeout, DefaultGitTimeout)
	if crash <= stale {
		errs = append(errs, field.Invalid(field.NewPath("spec", "crashTimeout"), crash.String(),
			fmt.Sprintf("must be above spec.leaseStaleAfter (%s): a crashed event's replay is refused while its lease is active", stale)))
	}
	// Under its lease an event may fetch git (gitTimeout) and then make the source handler's call (rpcTimeout).
	if git+rpc >= stale {
		errs = append(errs, field.Invalid(field.NewPath("spec", "rpcTimeout"), rpc.String(),
			fmt.Sprintf("spec.gitTimeout (%s) + spec.rpcTimeout must be below spec.leaseStaleAfter (%s): an event must end before its lease goes stale", git, stale)))
	}
	if v := p.Spec.VerifyTimeout; v != nil {
		// The provisioner's call waits for the verify, and every call above it waits for that one (the binary
		// refuses the same flag values).
		switch {
		case v.Duration < 0:
			errs = append(errs, field.Invalid(field.NewPath("spec", "verifyTimeout"), v.Duration.String(),
				"must not be negative (0s turns the verify off)"))
		case v.Duration >= rpc:
			errs = append(errs, field.Invalid(field.NewPath("spec", "verifyTimeout"), v.Duration.String(),
				fmt.Sprintf("must be below spec.rpcTimeout (%s): the calls that wait for the verify would be cut first", rpc)))
		}
	}
	return errs
}

// duration reads an optional duration (0 when unset: the binaries' own defaults apply).
func duration(d *metav1.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.Duration
}

// durationOr reads an optional duration, def when unset.
func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// Name is the name of every namespaced child of one stage.
func Name(stage string) string { return "katastroma-" + stage }

// PlatformLabel marks the cluster-scoped children of one Platform (value <namespace>.<name>) for cleanup.
const PlatformLabel = "katastroma.org/platform"

// CollectorConfigMapName is the OTel Collector routing ConfigMap.
const CollectorConfigMapName = "katastroma-otel-collector"

// StateConfigMapName is where pharos keeps its events; pharos creates it.
const StateConfigMapName = "katastroma-pharos-state"

// Labels select one stage's pods.
func Labels(p *gitopsv1alpha1.Platform, stage string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "katastroma", "app.kubernetes.io/instance": p.Name,
		"app.kubernetes.io/component": stage, "app.kubernetes.io/managed-by": "quartet-operator"}
}

// Endpoint is the in-cluster address of a stage: gRPC for the pipeline stages, OTLP/gRPC for pharos.
func Endpoint(p *gitopsv1alpha1.Platform, stage string) string {
	port := GRPCPort
	if stage == gitopsv1alpha1.StagePharos {
		port = OTLPGRPCPort
	}
	return fmt.Sprintf("%s.%s.svc:%d", Name(stage), p.Namespace, port)
}

// WebhookURL is the source handler's in-cluster webhook base URL.
func WebhookURL(p *gitopsv1alpha1.Platform) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", Name(gitopsv1alpha1.StageSource), p.Namespace, WebhookPort)
}

// StageSpec returns the spec of one stage.
func StageSpec(p *gitopsv1alpha1.Platform, stage string) gitopsv1alpha1.StageSpec {
	s := p.Spec.Stages
	return map[string]gitopsv1alpha1.StageSpec{
		gitopsv1alpha1.StageSource: s.Source, gitopsv1alpha1.StageRenderer: s.Renderer,
		gitopsv1alpha1.StageOrderer: s.Orderer, gitopsv1alpha1.StageLabeler: s.Labeler,
		gitopsv1alpha1.StageProvisioner: s.Provisioner, gitopsv1alpha1.StagePruner: s.Pruner,
		gitopsv1alpha1.StagePharos: s.Pharos,
	}[stage]
}

// Replicas is a stage's wanted replica count (default 1).
func Replicas(p *gitopsv1alpha1.Platform, stage string) int32 {
	if r := StageSpec(p, stage).Replicas; r != nil {
		return *r
	}
	return 1
}

// Stage authentication (stage.Authenticator): every stage's gRPC server and pharos's OTLP ports accept calls only
// from their Platform's stages (and its collector), which send a projected ServiceAccount token for the stage
// audience. Every stage calls another: the source handler the renderer, the renderer the orderer, the orderer the
// labeler, the labeler the provisioner, the provisioner the pruner, the pruner the orderer, pharos the source
// handler (Replay); so every stage mounts that token.

// StageAudience is the audience of the stage tokens (stage.Audience; the operator does not import the stage
// package, whose metrics would join its own).
const StageAudience = "katastroma-stage"

// StageTokenPath is where a calling stage's projected token is mounted.
const StageTokenPath = "/var/run/secrets/katastroma/stage/token"

// StageTokenVolume is the projected ServiceAccount token a stage (or the collector) sends to the Platform's
// stages: audience StageAudience, an hour long (the kubelet renews it; the stages re-read it).
func StageTokenVolume() corev1.Volume {
	return corev1.Volume{Name: "stage-token", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: StageAudience, ExpirationSeconds: ptr.To[int64](3600), Path: "token"}}}}}}
}

// StageTokenMount mounts StageTokenVolume at StageTokenPath.
func StageTokenMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: "stage-token", MountPath: path.Dir(StageTokenPath), ReadOnly: true}
}

// Args are the katastroma command line of a stage.
func Args(p *gitopsv1alpha1.Platform, stage string) []string {
	limit := p.Spec.ReplayLimit
	if limit <= 0 {
		limit = 3
	}
	metrics := fmt.Sprintf("--metrics-bind-address=:%d", MetricsPort)
	if stage == gitopsv1alpha1.StagePharos {
		args := []string{"pharos", fmt.Sprintf("--otlp-grpc-address=:%d", OTLPGRPCPort),
			fmt.Sprintf("--otlp-http-address=:%d", OTLPHTTPPort), metrics,
			"--state-configmap=" + p.Namespace + "/" + StateConfigMapName,
			fmt.Sprintf("--replay-limit=%d", limit),
			"--source-handler=" + Endpoint(p, gitopsv1alpha1.StageSource),
			"--source-handlers=" + strings.Join(SourceHandlerAddresses(p), ",")}
		if d := duration(p.Spec.CrashTimeout); d > 0 {
			args = append(args, "--crash-timeout="+d.String())
		}
		return append(args, "--stage-callers="+p.Namespace, "--stage-token-file="+StageTokenPath)
	}
	args := []string{stage, fmt.Sprintf("--grpc-bind-address=:%d", GRPCPort), metrics}
	if d := duration(p.Spec.RPCTimeout); d > 0 {
		args = append(args, "--rpc-timeout="+d.String())
	}
	if n, ok := next[stage]; ok {
		args = append(args, "--next="+Endpoint(p, n))
	}
	switch stage {
	case gitopsv1alpha1.StageSource:
		args = append(args, fmt.Sprintf("--http-bind-address=:%d", WebhookPort), fmt.Sprintf("--max-replay-attempts=%d", limit),
			// The source targets this Platform serves are pinned to it; another Platform's are left alone.
			"--platform="+p.Namespace+"/"+p.Name)
		if d := duration(p.Spec.LeaseStaleAfter); d > 0 {
			args = append(args, "--lease-stale-after="+d.String())
		}
		if d := duration(p.Spec.GitTimeout); d > 0 {
			args = append(args, "--git-timeout="+d.String())
		}
	case gitopsv1alpha1.StageProvisioner:
		if v := p.Spec.VerifyTimeout; v != nil {
			args = append(args, "--verify-timeout="+v.Duration.String()) // 0s is meaningful: the verify is off
		}
	case gitopsv1alpha1.StagePruner:
		args = append(args, "--orderer="+Endpoint(p, gitopsv1alpha1.StageOrderer))
	}
	args = append(args, "--stage-callers="+p.Namespace, "--stage-token-file="+StageTokenPath)
	if p.Spec.CollectorEndpoint != "" {
		args = append(args, "--otlp-endpoint="+p.Spec.CollectorEndpoint)
	}
	return args
}

// AllowRepositories adds the administrator's fetch guard exemptions (--gitops-repository-allow-cidrs) to the
// source stage's Deployment d as --repository-allow-cidrs; none adds nothing.
func AllowRepositories(d *appsv1.Deployment, cidrs []string) {
	if len(cidrs) == 0 || len(d.Spec.Template.Spec.Containers) == 0 {
		return
	}
	c := &d.Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, "--repository-allow-cidrs="+strings.Join(cidrs, ","))
}

// ServiceAccount of one stage. Every stage calls the API server (each reviews its callers' tokens and checks that
// the work's namespace is one the Platform serves), so every stage gets its token.
func ServiceAccount(p *gitopsv1alpha1.Platform, stage string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: meta(p, stage), AutomountServiceAccountToken: ptr.To(true)}
}

func meta(p *gitopsv1alpha1.Platform, stage string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: p.Namespace, Name: Name(stage), Labels: Labels(p, stage)}
}

// ports are the container ports of a stage.
func ports(stage string) []corev1.ContainerPort {
	out := []corev1.ContainerPort{{Name: "metrics", ContainerPort: MetricsPort, Protocol: corev1.ProtocolTCP}}
	switch stage {
	case gitopsv1alpha1.StagePharos:
		return append(out, corev1.ContainerPort{Name: "otlp-grpc", ContainerPort: OTLPGRPCPort, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "otlp-http", ContainerPort: OTLPHTTPPort, Protocol: corev1.ProtocolTCP})
	case gitopsv1alpha1.StageSource:
		out = append(out, corev1.ContainerPort{Name: "webhook", ContainerPort: WebhookPort, Protocol: corev1.ProtocolTCP})
	}
	return append(out, corev1.ContainerPort{Name: "grpc", ContainerPort: GRPCPort, Protocol: corev1.ProtocolTCP})
}

// Deployment of one stage, under the restricted Pod Security Standard.
func Deployment(p *gitopsv1alpha1.Platform, stage string) *appsv1.Deployment {
	spec := StageSpec(p, stage)
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: GRPCPort}},
		PeriodSeconds: 10, TimeoutSeconds: 5}
	if stage == gitopsv1alpha1.StagePharos {
		probe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
			Port: intstr.FromInt32(OTLPHTTPPort)}}, PeriodSeconds: 10, TimeoutSeconds: 5}
	}
	c := corev1.Container{
		Name: "katastroma", Image: p.Spec.Image, Command: []string{"/katastroma"}, Args: Args(p, stage),
		Ports: ports(stage), Resources: *spec.Resources.DeepCopy(), ReadinessProbe: probe, LivenessProbe: probe.DeepCopy(),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		// Git fetches and rendering may spill to a temporary directory; the root filesystem stays read-only.
		VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
	}
	if stage == gitopsv1alpha1.StageSource {
		// pharos replays through the address the source handler's spans carry (docs/pharos.md).
		c.Env = []corev1.EnvVar{{Name: "OTEL_RESOURCE_ATTRIBUTES",
			Value: "katastroma.source_handler.address=" + SourceHandlerAddresses(p)[0]}}
	}
	volumes := []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		StageTokenVolume()}
	c.VolumeMounts = append(c.VolumeMounts, StageTokenMount())
	labels := Labels(p, stage)
	return &appsv1.Deployment{
		ObjectMeta: meta(p, stage),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(Replicas(p, stage)),
			Strategy: strategy(stage),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName:           Name(stage),
					AutomountServiceAccountToken: ptr.To(true),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers:                    []corev1.Container{c},
					Volumes:                       volumes,
					TerminationGracePeriodSeconds: TerminationGracePeriod(p, stage),
				},
			},
		},
	}
}

// TerminationGracePeriod of a stage's pods: a pipeline stage drains in-flight events on SIGTERM for up to the
// longest event (git timeout + RPC timeout + 30s, runner.DrainTimeout), so its pods get that and 30s more; the
// default 30s would kill events mid-apply on every upgrade. Pharos keeps the default.
func TerminationGracePeriod(p *gitopsv1alpha1.Platform, stage string) *int64 {
	if stage == gitopsv1alpha1.StagePharos {
		return nil
	}
	d := durationOr(p.Spec.RPCTimeout, DefaultRPCTimeout) + durationOr(p.Spec.GitTimeout, DefaultGitTimeout) + time.Minute
	return ptr.To(int64(d / time.Second))
}

// PodDisruptionBudget of a pipeline stage (nil for pharos): a drain or an upgrade evicts one of its pods at a
// time, so a stage with several replicas keeps serving while the evicted pod drains its events within its grace
// period (TerminationGracePeriod). It never allows zero: a one-replica stage must not block node drains; its events
// are protected by the drain and grace period, and pharos replays what a drain still cuts. Pharos runs one replica
// with Recreate and has none.
func PodDisruptionBudget(p *gitopsv1alpha1.Platform, stage string) *policyv1.PodDisruptionBudget {
	if stage == gitopsv1alpha1.StagePharos {
		return nil
	}
	return &policyv1.PodDisruptionBudget{ObjectMeta: meta(p, stage), Spec: policyv1.PodDisruptionBudgetSpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)),
		Selector:       &metav1.LabelSelector{MatchLabels: Labels(p, stage)},
	}}
}

// Service of one stage: headless for the pipeline stages (their callers balance over the pods themselves).
func Service(p *gitopsv1alpha1.Platform, stage string) *corev1.Service {
	var sp []corev1.ServicePort
	for _, cp := range ports(stage) {
		sp = append(sp, corev1.ServicePort{Name: cp.Name, Port: cp.ContainerPort, Protocol: corev1.ProtocolTCP,
			TargetPort: intstr.FromString(cp.Name)})
	}
	svc := &corev1.Service{ObjectMeta: meta(p, stage), Spec: corev1.ServiceSpec{Selector: Labels(p, stage), Ports: sp}}
	if stage != gitopsv1alpha1.StagePharos {
		// Headless: DNS answers with every ready pod, and the calling stage's round robin spreads its streams
		// over all of them (a ClusterIP would pin each connection to one pod). docs/gitops.md "Balancing".
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

// NetworkPolicy of one stage: its gRPC port admits only the stages that call it, pharos's OTLP ports only the
// Platform's stages and collector (pharosOTLPRule); metrics and the webhook admit any source (Prometheus,
// GitHub). Egress is left open: the stages reach the API server, git hosts and the collector.
func NetworkPolicy(p *gitopsv1alpha1.Platform, stage string) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := func(n int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(n))}}
	}
	open := []int32{MetricsPort}
	if stage == gitopsv1alpha1.StageSource {
		open = append(open, WebhookPort)
	}
	var rules []networkingv1.NetworkPolicyIngressRule
	for _, n := range open {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(n)})
	}
	if from := callers[stage]; len(from) > 0 {
		var peers []networkingv1.NetworkPolicyPeer
		for _, c := range from {
			peers = append(peers, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: Labels(p, c)}})
		}
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(GRPCPort), From: peers})
	}
	if stage == gitopsv1alpha1.StagePharos {
		rules = append(rules, pharosOTLPRule(p))
	}
	return &networkingv1.NetworkPolicy{ObjectMeta: meta(p, stage), Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: Labels(p, stage)},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     rules,
	}}
}

// PharosRoleBinding lets pharos keep its state ConfigMap in the Platform's namespace, through the shipped
// PharosClusterRole: the operator writes no Role of its own.
func PharosRoleBinding(p *gitopsv1alpha1.Platform) *rbacv1.RoleBinding {
	m := meta(p, gitopsv1alpha1.StagePharos)
	return &rbacv1.RoleBinding{ObjectMeta: m,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: PharosClusterRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: m.Name, Namespace: p.Namespace}}}
}

// CollectorConfigMap is the OTel Collector configuration routing the katastroma stages' spans to pharos (every
// gitops span, so crash detection sees events start) and all traces to the backend (docs/pharos.md). pharos takes
// spans only with a stage token of its Platform: the collector sends the projected token it mounts at
// StageTokenPath (it runs as ServiceAccount katastroma-otel-collector in the Platform's namespace) over OTLP/HTTP,
// since gRPC sends per-call credentials only over TLS and the stages talk without it.
func CollectorConfigMap(p *gitopsv1alpha1.Platform) *corev1.ConfigMap {
	var b strings.Builder
	backend := p.Spec.TraceBackend != ""
	b.WriteString(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: 0.0.0.0:4317}
      http: {endpoint: 0.0.0.0:4318}
connectors:
  routing:
`)
	if backend {
		b.WriteString("    default_pipelines: [traces/backend]\n")
	}
	b.WriteString(`    table:
      - condition: 'IsMatch(attributes["service.name"], "^katastroma-")'
`)
	if backend {
		b.WriteString("        pipelines: [traces/backend, traces/pharos]\n")
	} else {
		b.WriteString("        pipelines: [traces/pharos]\n")
	}
	fmt.Fprintf(&b, `processors:
  batch: {}
  filter/pharos-gitops:
    error_mode: ignore
    traces:
      span:
        - 'instrumentation_scope.name != "github.com/quartet-dev/quartet-operator/internal/gitops"'
extensions:
  bearertokenauth/pharos:
    filename: %s
exporters:
  otlphttp/pharos:
    endpoint: http://%s.%s.svc:%d
    tls: {insecure: true}
    auth: {authenticator: bearertokenauth/pharos}
    retry_on_failure: {enabled: true}
    sending_queue: {enabled: true}
`, StageTokenPath, Name(gitopsv1alpha1.StagePharos), p.Namespace, OTLPHTTPPort)
	if backend {
		fmt.Fprintf(&b, "  otlp/backend:\n    endpoint: %s\n    tls: {insecure: true}\n", p.Spec.TraceBackend)
	}
	b.WriteString(`service:
  extensions: [bearertokenauth/pharos]
  pipelines:
    traces/in:
      receivers: [otlp]
      exporters: [routing]
    traces/pharos:
      receivers: [routing]
      processors: [filter/pharos-gitops, batch]
      exporters: [otlphttp/pharos]
`)
	if backend {
		b.WriteString(`    traces/backend:
      receivers: [routing]
      processors: [batch]
      exporters: [otlp/backend]
`)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: CollectorConfigMapName,
		Labels: Labels(p, CollectorComponent)}, Data: map[string]string{"collector.yaml": b.String()}}
}
