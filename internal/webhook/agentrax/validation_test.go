package agentrax

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

func valid() *agentraxv1alpha1.AgentDeployment {
	return &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "my-agent", Namespace: "tenant-alpha"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{
			Image: "ghcr.io/org/my-agent:v2.1", Port: 8080, TenantRef: "alpha-quota",
			Replicas: agentraxv1alpha1.ReplicasSpec{Min: 2, Max: 10, Metric: agentraxv1alpha1.MetricQueueDepth, Target: 5},
			Rollout: &agentraxv1alpha1.RolloutSpec{
				Strategy: agentraxv1alpha1.StrategyCanary,
				Steps: []agentraxv1alpha1.RolloutStep{
					{SetWeight: ptr.To[int32](20)},
					{Pause: &agentraxv1alpha1.PauseStep{Duration: metav1.Duration{Duration: 2 * time.Minute}}},
					{SetWeight: ptr.To[int32](100)},
				},
				Rollback: &agentraxv1alpha1.RollbackSpec{MaxErrorRate: "2%", MaxP99LatencyMs: 500, MinRequestSample: 50},
				Traffic: &agentraxv1alpha1.TrafficSpec{Route: &agentraxv1alpha1.OwnedRouteSpec{
					ParentRefs: []agentraxv1alpha1.GatewayParentRef{{Name: "shared", Namespace: "gateways"}},
					Hostnames:  []string{"agent.example.com", "*.agents.example.com"},
					Matches: []agentraxv1alpha1.RouteMatch{{Path: &agentraxv1alpha1.RoutePathMatch{Type: "PathPrefix", Value: "/v1"},
						Headers: []agentraxv1alpha1.RouteHeaderMatch{{Name: "X-Tenant", Value: "alpha"}}}},
				}},
			},
			MCP: &agentraxv1alpha1.MCPSpec{Expose: true, Tools: []string{"search", "summarize"}},
		},
	}
}

func TestValidateAgentDeployment(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ValidateAgentDeployment(valid(), nil)).To(BeEmpty())

	for name, tc := range map[string]struct {
		edit  func(ad *agentraxv1alpha1.AgentDeployment)
		field string
		text  string
	}{
		"min above max":    {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Min = 11 }, "spec.replicas.min", "must not exceed replicas.max (10)"},
		"unknown metric":   {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Metric = "cpu" }, "spec.replicas.metric", "Unsupported value"},
		"zero target":      {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Target = 0 }, "spec.replicas.target", "at least 1"},
		"bad port":         {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Port = 70000 }, "spec.port", "1 to 65535"},
		"empty image":      {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Image = " " }, "spec.image", "Required"},
		"bad tenantRef":    {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.TenantRef = "Alpha Quota" }, "spec.tenantRef", "RFC 1123"},
		"unknown strategy": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Strategy = "BlueGreen" }, "spec.rollout.strategy", "Unsupported value"},
		"empty step":       {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Steps[1].Pause = nil }, "spec.rollout.steps[1]", "exactly one of setWeight and pause"},
		"step with both": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Steps[0].Pause = &agentraxv1alpha1.PauseStep{}
		}, "spec.rollout.steps[0]", "exactly one of setWeight and pause"},
		"weight over 100": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Steps[0].SetWeight = ptr.To[int32](120) }, "spec.rollout.steps[0].setWeight", "0 to 100"},
		"zero pause":      {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Steps[1].Pause.Duration.Duration = 0 }, "spec.rollout.steps[1].pause.duration", "greater than zero"},
		"pause before any weight": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Steps = append([]agentraxv1alpha1.RolloutStep{{Pause: ad.Spec.Rollout.Steps[1].Pause}}, ad.Spec.Rollout.Steps...)
		}, "spec.rollout.steps[0].pause", "must follow a setWeight above 0"},
		"pause at weight 0": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Steps[0].SetWeight = ptr.To[int32](0) },
			"spec.rollout.steps[1].pause", "must follow a setWeight above 0"},
		"probe without handler": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.ReadinessProbe = &corev1.Probe{} },
			"spec.readinessProbe", "exactly one of exec, httpGet, tcpSocket and grpc"},
		"startup probe threshold": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.StartupProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
				SuccessThreshold: 2}
		}, "spec.startupProbe.successThreshold", "must be 1"},
		"no full weight":    {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Steps[2].SetWeight = ptr.To[int32](90) }, "spec.rollout.steps", "setWeight: 100"},
		"canary no steps":   {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Steps = nil }, "spec.rollout.steps", "Required"},
		"canary no rollbk":  {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Rollback = nil }, "spec.rollout.rollback", "Required"},
		"error rate format": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Rollback.MaxErrorRate = "0.02" }, "spec.rollout.rollback.maxErrorRate", `"2%"`},
		"error rate range":  {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Rollback.MaxErrorRate = "150%" }, "spec.rollout.rollback.maxErrorRate", "between 0% and 100%"},
		"latency":           {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Rollback.MaxP99LatencyMs = 0 }, "spec.rollout.rollback.maxP99LatencyMs", "at least 1"},
		"min sample":        {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Rollback.MinRequestSample = 0 }, "spec.rollout.rollback.minRequestSample", "at least 1"},
		"no pause step": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Steps = []agentraxv1alpha1.RolloutStep{{SetWeight: ptr.To[int32](50)}, {SetWeight: ptr.To[int32](100)}}
		}, "spec.rollout.steps", "at least one pause step"},
		"insufficient policy": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Rollback.OnInsufficientSamples = "Promote" }, "spec.rollout.rollback.onInsufficientSamples", "Unsupported value"},
		"traffic empty":       {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Traffic = &agentraxv1alpha1.TrafficSpec{} }, "spec.rollout.traffic", "set route"},
		"traffic both": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Traffic.RouteName = "mine" },
			"spec.rollout.traffic", "only one of route and routeName"},
		"route name": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Traffic = &agentraxv1alpha1.TrafficSpec{RouteName: "My Route"}
		}, "spec.rollout.traffic.routeName", "RFC 1123"},
		"no parent": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Traffic.Route.ParentRefs = nil }, "spec.rollout.traffic.route.parentRefs", "Required"},
		"bad parent": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Traffic.Route.ParentRefs[0].Name = "Gate way"
		}, "spec.rollout.traffic.route.parentRefs[0].name", "RFC 1123"},
		"bad hostname": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Traffic.Route.Hostnames[0] = "a.*.com" }, "spec.rollout.traffic.route.hostnames[0]", "DNS name"},
		"bad path":     {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Rollout.Traffic.Route.Matches[0].Path.Value = "v1" }, "spec.rollout.traffic.route.matches[0].path.value", `start with "/"`},
		"bad header": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Traffic.Route.Matches[0].Headers[0].Name = "X Tenant"
		}, "spec.rollout.traffic.route.matches[0].headers[0].name", "Invalid value"},
		"bad metric": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Metrics = &agentraxv1alpha1.CanaryMetricsSpec{Requests: "http requests"}
		}, "spec.rollout.metrics", "not a PromQL identifier"},
		"label twice": {func(ad *agentraxv1alpha1.AgentDeployment) {
			ad.Spec.Rollout.Metrics = &agentraxv1alpha1.CanaryMetricsSpec{CodeLabel: "namespace"}
		}, "spec.rollout.metrics", "used for two roles"},
		"empty tool":     {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.MCP.Tools = []string{"search", ""} }, "spec.mcp.tools[1]", "must not be empty"},
		"duplicate tool": {func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.MCP.Tools = []string{"search", "search"} }, "spec.mcp.tools[1]", "Duplicate value"},
	} {
		t.Run(name, func(t *testing.T) {
			ad := valid()
			tc.edit(ad)
			errs := ValidateAgentDeployment(ad, nil)
			NewWithT(t).Expect(errs.ToAggregate()).To(MatchError(And(ContainSubstring(tc.field), ContainSubstring(tc.text))))
		})
	}
}

func TestValidateAgentDeploymentUpdate(t *testing.T) {
	g := NewWithT(t)
	old := valid()
	old.Status.Phase = agentraxv1alpha1.PhaseRolloutInProgress
	old.Status.CanaryVersion = "ghcr.io/org/my-agent:v2.2"
	ad := old.DeepCopy()
	ad.Spec.Image = "ghcr.io/org/my-agent:v2.3"
	g.Expect(ValidateAgentDeployment(ad, old)).To(BeEmpty(),
		"a new image during a rollout restarts the canary: a typo is fixed by fixing the typo")

	ad = old.DeepCopy()
	ad.Spec.Replicas.Max = 8
	g.Expect(ValidateAgentDeployment(ad, old)).To(BeEmpty(), "other edits are fine during a rollout")

	old.Status.Phase = agentraxv1alpha1.PhaseRunning
	ad = old.DeepCopy()
	ad.Spec.Image = "ghcr.io/org/my-agent:v2.3"
	g.Expect(ValidateAgentDeployment(ad, old)).To(BeEmpty())

	ad.Spec.TenantRef = "beta-quota"
	g.Expect(ValidateAgentDeployment(ad, old).ToAggregate()).To(MatchError(And(
		ContainSubstring("spec.tenantRef"), ContainSubstring("immutable"))))
}

func TestValidateProgressDeadline(t *testing.T) {
	for _, tc := range []struct {
		d  time.Duration
		ok bool
	}{{time.Second, true}, {10 * time.Minute, true}, {24 * time.Hour, true}, {0, false}, {999 * time.Millisecond, false},
		{-time.Minute, false}, {25 * time.Hour, false}} {
		t.Run(tc.d.String(), func(t *testing.T) {
			ad := valid()
			ad.Spec.Rollout.ProgressDeadline = &metav1.Duration{Duration: tc.d}
			errs := ValidateAgentDeployment(ad, nil)
			if tc.ok {
				NewWithT(t).Expect(errs).To(BeEmpty())
				return
			}
			NewWithT(t).Expect(errs.ToAggregate()).To(MatchError(ContainSubstring("spec.rollout.progressDeadline")))
		})
	}
}

func TestDefaultProgressDeadline(t *testing.T) {
	g := NewWithT(t)
	ad := valid()
	SetDefaults(ad)
	g.Expect(ad.Spec.Rollout.ProgressDeadline).To(Equal(&metav1.Duration{Duration: 10 * time.Minute}))
	ad.Spec.Rollout.ProgressDeadline = &metav1.Duration{Duration: time.Minute}
	SetDefaults(ad)
	g.Expect(ad.Spec.Rollout.ProgressDeadline.Duration).To(Equal(time.Minute), "a set deadline is kept")
}

func TestWarningsForCanaryWithoutTraffic(t *testing.T) {
	g := NewWithT(t)
	ad := valid()
	g.Expect(warnings(ad)).To(BeEmpty())
	ad.Spec.Rollout.Traffic = nil
	g.Expect(ValidateAgentDeployment(ad, nil)).To(BeEmpty(), "valid: the seed's canary has no traffic section")
	g.Expect(warnings(ad)).To(ConsistOf(ContainSubstring("spec.rollout.traffic is not set")))
}

func TestDefaults(t *testing.T) {
	g := NewWithT(t)
	ad := &agentraxv1alpha1.AgentDeployment{}
	SetDefaults(ad)
	g.Expect(ad.Spec.Port).To(Equal(int32(8080)))
	g.Expect(ad.Spec.Rollout.Strategy).To(Equal(agentraxv1alpha1.StrategyRecreate))
	ad = valid()
	ad.Spec.Port = 9000
	SetDefaults(ad)
	g.Expect(ad.Spec.Port).To(Equal(int32(9000)))
	g.Expect(ad.Spec.Rollout.Strategy).To(Equal(agentraxv1alpha1.StrategyCanary))
	g.Expect(ad.Spec.Rollout.Rollback.OnInsufficientSamples).To(Equal(agentraxv1alpha1.InsufficientSamplesHold))
}

// FuzzValidateAgentDeployment feeds arbitrary specs (as JSON) to the validator: it must never panic, and every
// error it reports must name a field under spec.
func FuzzValidateAgentDeployment(f *testing.F) {
	seed, _ := json.Marshal(valid().Spec)
	f.Add(seed, seed)
	f.Add([]byte(`{"replicas":{"min":3,"max":1},"rollout":{"strategy":"Canary","steps":[{}]},"mcp":{"tools":["",""]}}`), []byte(`{}`))
	f.Add([]byte(`{"rollout":{"steps":[{"setWeight":-1,"pause":{"duration":"-1s"}}],"rollback":{"maxErrorRate":"1e9%"}}}`), seed)
	f.Add([]byte(`{"rollout":{"strategy":"Canary","steps":[{"setWeight":100}],"rollback":{"onInsufficientSamples":"x"},`+
		`"traffic":{"routeName":"r","route":{"parentRefs":[{"name":""}],"hostnames":["*"],"matches":[{"path":{"type":"Regex","value":""},"headers":[{"name":":"}]}]}},`+
		`"metrics":{"requests":"a b","codeLabel":"__x"}}}`), seed)
	f.Add([]byte(`{"rollout":{"strategy":"Canary","progressDeadline":"-5m"}}`), seed)
	f.Add([]byte(`{"rollout":{"progressDeadline":"9999h"}}`), seed)
	f.Fuzz(func(t *testing.T, spec, oldSpec []byte) {
		ad, old := &agentraxv1alpha1.AgentDeployment{}, &agentraxv1alpha1.AgentDeployment{}
		if json.Unmarshal(spec, &ad.Spec) != nil || json.Unmarshal(oldSpec, &old.Spec) != nil {
			return
		}
		old.Status.Phase = agentraxv1alpha1.PhaseRolloutInProgress
		for _, o := range []*agentraxv1alpha1.AgentDeployment{nil, old} {
			for _, e := range ValidateAgentDeployment(ad, o) {
				if len(e.Field) < 5 || e.Field[:5] != "spec." {
					t.Fatalf("error %q does not name a spec field", e.Error())
				}
			}
		}
	})
}
