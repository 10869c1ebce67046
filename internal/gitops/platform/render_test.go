package platform

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

func platform() *gitopsv1alpha1.Platform {
	return &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: "katastroma-system", Name: "main"},
		Spec: gitopsv1alpha1.PlatformSpec{Image: "example.com/katastroma:v1", CollectorEndpoint: "otel.obs.svc:4317",
			LeaseStaleAfter: &metav1.Duration{Duration: 10 * time.Minute}, CrashTimeout: &metav1.Duration{Duration: 12 * time.Minute},
			Stages: gitopsv1alpha1.PlatformStages{Renderer: gitopsv1alpha1.StageSpec{Replicas: ptr.To[int32](4)}}}}
}

func TestArgsWireTheStages(t *testing.T) {
	p := platform()
	for stage, want := range map[string][]string{
		"source": {"source", "--next=katastroma-renderer.katastroma-system.svc:50051", "--http-bind-address=:8080",
			"--max-replay-attempts=3", "--lease-stale-after=10m0s", "--otlp-endpoint=otel.obs.svc:4317",
			"--platform=katastroma-system/main"},
		"renderer":    {"--next=katastroma-orderer.katastroma-system.svc:50051"},
		"orderer":     {"--next=katastroma-labeler.katastroma-system.svc:50051"},
		"labeler":     {"--next=katastroma-provisioner.katastroma-system.svc:50051"},
		"provisioner": {"--next=katastroma-pruner.katastroma-system.svc:50051"},
		"pruner":      {"--orderer=katastroma-orderer.katastroma-system.svc:50051"},
		"pharos": {"pharos", "--state-configmap=katastroma-system/katastroma-pharos-state", "--crash-timeout=12m0s",
			"--source-handler=katastroma-source.katastroma-system.svc:50051", "--replay-limit=3"},
	} {
		t.Run(stage, func(t *testing.T) {
			g := NewWithT(t)
			args := Args(p, stage)
			g.Expect(args[0]).To(Equal(stage))
			g.Expect(args).To(ContainElements(want))
			if stage == "pruner" || stage == "pharos" {
				g.Expect(strings.Join(args, " ")).NotTo(ContainSubstring("--next="))
			}
		})
	}
}

func TestDeploymentIsRestrictedAndSized(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	for _, stage := range Stages {
		d := Deployment(p, stage)
		want := int32(1)
		if stage == "renderer" {
			want = 4
		}
		g.Expect(*d.Spec.Replicas).To(Equal(want), stage)
		pod := d.Spec.Template.Spec
		g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		c := pod.Containers[0]
		g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		g.Expect(c.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		g.Expect(d.Spec.Selector.MatchLabels).To(Equal(d.Spec.Template.Labels))
		g.Expect(*pod.AutomountServiceAccountToken).To(BeTrue(), "every stage reviews its callers' tokens: %s", stage)
	}
	src := Deployment(p, "source").Spec.Template.Spec.Containers[0]
	g.Expect(src.Env).To(ContainElement(corev1.EnvVar{Name: "OTEL_RESOURCE_ATTRIBUTES",
		Value: "katastroma.source_handler.address=katastroma-source.katastroma-system.svc:50051"}))
}

func TestNetworkPolicyAdmitsOnlyTheCallingStage(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	np := NetworkPolicy(p, "provisioner")
	var grpc []string
	for _, r := range np.Spec.Ingress {
		if r.Ports[0].Port.IntValue() == GRPCPort {
			for _, peer := range r.From {
				grpc = append(grpc, peer.PodSelector.MatchLabels["app.kubernetes.io/component"])
			}
		}
	}
	g.Expect(grpc).To(ConsistOf("labeler"))
	g.Expect(NetworkPolicy(p, "orderer").Spec.Ingress).To(ContainElement(HaveField("From", HaveLen(2))),
		"the renderer and the pruner call the orderer")
	for _, r := range NetworkPolicy(p, "renderer").Spec.Ingress {
		if r.Ports[0].Port.IntValue() == GRPCPort {
			g.Expect(r.From).NotTo(BeEmpty(), "no open gRPC port")
		}
	}
}

func TestImpersonationIsLimitedToTheTenantServiceAccounts(t *testing.T) {
	g := NewWithT(t)
	for stage, sa := range map[string]string{"provisioner": "provisioner", "pruner": "pruner"} {
		var imp int
		for _, r := range ShippedRules(StageClusterRole(stage)) {
			for _, v := range r.Verbs {
				if v == "impersonate" || v == "*" {
					imp++
					g.Expect(r.Resources).To(Equal([]string{"serviceaccounts"}))
					g.Expect(r.ResourceNames).To(Equal([]string{sa}))
				}
			}
			g.Expect(r.Verbs).NotTo(ContainElement("*"))
		}
		g.Expect(imp).To(Equal(1), stage)
	}
	for _, name := range []string{SourceClusterRole, SourceTenantClusterRole, CallerCheckClusterRole} {
		g.Expect(ShippedRules(name)).NotTo(ContainElement(HaveField("Verbs", ContainElement("impersonate"))), name)
	}
}

func TestCollectorConfigRoutesToPharos(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	for _, backend := range []string{"", "tempo.obs.svc:4317"} {
		p.Spec.TraceBackend = backend
		cm := CollectorConfigMap(p)
		var cfg map[string]any
		g.Expect(yaml.Unmarshal([]byte(cm.Data["collector.yaml"]), &cfg)).To(Succeed(), "valid YAML")
		text := cm.Data["collector.yaml"]
		g.Expect(text).To(ContainSubstring("endpoint: http://katastroma-pharos.katastroma-system.svc:4318"))
		g.Expect(text).To(ContainSubstring("filter/pharos-gitops"))
		g.Expect(strings.Contains(text, "otlp/backend")).To(Equal(backend != ""))
	}
}

func TestValidate(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	g.Expect(Validate(p)).To(BeEmpty())
	p.Spec.CrashTimeout = &metav1.Duration{Duration: 5 * time.Minute}
	p.Spec.Stages.Pharos.Replicas = ptr.To[int32](2)
	errs := Validate(p)
	g.Expect(errs).To(HaveLen(2))
	g.Expect(errs[0].Error()).To(ContainSubstring("spec.stages.pharos.replicas: Invalid value: 2"))
	g.Expect(errs[1].Error()).To(ContainSubstring("spec.crashTimeout: Invalid value: \"5m0s\": must be above spec.leaseStaleAfter (10m0s)"))
}

// The stages dial each other's Service names with round robin: only a headless Service lets DNS answer with every
// ready pod, so every replica of a stage gets work. Pharos is one writer behind the collector and keeps its IP.
func TestStageServicesAreHeadless(t *testing.T) {
	p := platform()
	for _, stage := range Stages {
		t.Run(stage, func(t *testing.T) {
			g := NewWithT(t)
			svc := Service(p, stage)
			if stage == gitopsv1alpha1.StagePharos {
				g.Expect(svc.Spec.ClusterIP).To(BeEmpty())
				return
			}
			g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
			g.Expect(svc.Spec.PublishNotReadyAddresses).To(BeFalse(), "DNS lists only ready pods")
			g.Expect(svc.Spec.Ports).To(ContainElement(HaveField("Name", "grpc")))
		})
	}
}

// The deadlines flow from the Platform to the stages' flags; unset, the binaries' defaults apply.
func TestDeadlinesReachTheStages(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	for _, stage := range Stages {
		g.Expect(Args(p, stage)).NotTo(ContainElement(Or(HavePrefix("--rpc-timeout"), HavePrefix("--git-timeout"))), stage)
	}
	p.Spec.RPCTimeout = &metav1.Duration{Duration: 3 * time.Minute}
	p.Spec.GitTimeout = &metav1.Duration{Duration: time.Minute}
	for _, stage := range Stages {
		args := Args(p, stage)
		switch stage {
		case gitopsv1alpha1.StagePharos:
			g.Expect(args).NotTo(ContainElement(Or(HavePrefix("--rpc-timeout"), HavePrefix("--git-timeout"))))
		case gitopsv1alpha1.StageSource:
			g.Expect(args).To(ContainElements("--rpc-timeout=3m0s", "--git-timeout=1m0s"))
		default:
			g.Expect(args).To(ContainElement("--rpc-timeout=3m0s"), stage)
			g.Expect(args).NotTo(ContainElement(HavePrefix("--git-timeout")), stage)
		}
	}
	p.Spec.RPCTimeout = &metav1.Duration{Duration: 10 * time.Minute}
	errs := Validate(p)
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Error()).To(ContainSubstring(`spec.rpcTimeout: Invalid value: "10m0s": spec.gitTimeout (1m0s) + spec.rpcTimeout must be below spec.leaseStaleAfter (10m0s)`))
}

// Unset durations are the binaries' defaults, and an event holds its lease for a git fetch plus the source
// handler's call: gitTimeout + rpcTimeout must stay below leaseStaleAfter, defaults included.
func TestValidateDeadlines(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	for _, tc := range []struct {
		name                   string
		stale, crash, rpc, git *metav1.Duration
		err                    string
	}{
		{name: "all defaults"},
		{name: "rpcTimeout above the default leaseStaleAfter", rpc: d(15 * time.Minute),
			err: `spec.rpcTimeout: Invalid value: "15m0s": spec.gitTimeout (2m0s) + spec.rpcTimeout must be below spec.leaseStaleAfter (10m0s)`},
		{name: "rpcTimeout plus the default gitTimeout reaches leaseStaleAfter", rpc: d(8 * time.Minute),
			err: `spec.rpcTimeout: Invalid value: "8m0s": spec.gitTimeout (2m0s) + spec.rpcTimeout must be below spec.leaseStaleAfter (10m0s)`},
		{name: "rpcTimeout just fits", rpc: d(7*time.Minute + 59*time.Second)},
		{name: "gitTimeout plus the default rpcTimeout reaches leaseStaleAfter", git: d(5 * time.Minute),
			err: `spec.rpcTimeout: Invalid value: "5m0s": spec.gitTimeout (5m0s) + spec.rpcTimeout must be below spec.leaseStaleAfter (10m0s)`},
		{name: "a small leaseStaleAfter against the default rpcTimeout", stale: d(6 * time.Minute), crash: d(7 * time.Minute),
			err: `spec.rpcTimeout: Invalid value: "5m0s": spec.gitTimeout (2m0s) + spec.rpcTimeout must be below spec.leaseStaleAfter (6m0s)`},
		{name: "a large leaseStaleAfter against the default crashTimeout", stale: d(20 * time.Minute),
			err: `spec.crashTimeout: Invalid value: "12m0s": must be above spec.leaseStaleAfter (20m0s)`},
		{name: "all set and consistent", stale: d(20 * time.Minute), crash: d(25 * time.Minute), rpc: d(15 * time.Minute),
			git: d(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := platform()
			p.Spec.LeaseStaleAfter, p.Spec.CrashTimeout, p.Spec.RPCTimeout, p.Spec.GitTimeout = tc.stale, tc.crash, tc.rpc, tc.git
			errs := Validate(p)
			if tc.err == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Error()).To(ContainSubstring(tc.err))
		})
	}
}

// The defaults Validate assumes are the binaries' own.
func TestValidateDefaultsAreTheBinariesDefaults(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DefaultGitTimeout).To(Equal(source.DefaultGitTimeout))
	g.Expect(DefaultRPCTimeout).To(Equal(stage.DefaultConnection.RPCTimeout))
}

// TestStagePodsOutliveTheLongestEvent: a pipeline stage's pods get a grace period above its drain (the longest
// event: git timeout + RPC timeout + 30s), not the default 30s that cut events off on every upgrade.
func TestStagePodsOutliveTheLongestEvent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rpc, git time.Duration
		want     int64
	}{
		{name: "defaults", want: int64((5*time.Minute + 2*time.Minute + time.Minute) / time.Second)},
		{name: "set", rpc: 3 * time.Minute, git: time.Minute, want: 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := platform()
			if tc.rpc > 0 {
				p.Spec.RPCTimeout = &metav1.Duration{Duration: tc.rpc}
				p.Spec.GitTimeout = &metav1.Duration{Duration: tc.git}
			}
			for _, stage := range Stages {
				grace := Deployment(p, stage).Spec.Template.Spec.TerminationGracePeriodSeconds
				if stage == gitopsv1alpha1.StagePharos {
					g.Expect(grace).To(BeNil())
					continue
				}
				g.Expect(grace).NotTo(BeNil(), stage)
				g.Expect(*grace).To(Equal(tc.want), stage)
			}
		})
	}
}
