package plan

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func meta(ns, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
}

func tgt(ns, name string, labels map[string]string) v1.Target {
	return v1.Target{ObjectMeta: meta(ns, name, labels), Spec: v1.TargetSpec{Address: name + ":57400", Profile: "default"}}
}

func sub(ns, name string, labels map[string]string) v1.Subscription {
	return v1.Subscription{ObjectMeta: meta(ns, name, labels), Spec: v1.SubscriptionSpec{Paths: []string{"/interfaces"}, Mode: "STREAM/SAMPLE",
		SampleInterval: &metav1.Duration{Duration: 10 * time.Second}}}
}

func sel(kv ...string) []metav1.LabelSelector {
	return []metav1.LabelSelector{{MatchLabels: map[string]string{kv[0]: kv[1]}}}
}

func baseSnapshot() Snapshot {
	profile := &v1.TargetProfile{ObjectMeta: meta("lab", "default", nil), Spec: v1.TargetProfileSpec{
		CredentialsRef: &v1.SecretReference{Name: "creds"}, Encoding: v1.EncodingJSONIETF,
		Timeout: &metav1.Duration{Duration: 5 * time.Second}, Labels: map[string]string{"site": "lab"}}}
	return Snapshot{
		Targets: []v1.Target{
			tgt("lab", "r1", map[string]string{"role": "core"}), tgt("lab", "r2", map[string]string{"role": "edge"}),
			tgt("lab", "r3", map[string]string{"role": "core"}), tgt("other", "r1", map[string]string{"role": "core"}),
		},
		Subscriptions: []v1.Subscription{sub("lab", "ifaces", map[string]string{"set": "base"}), sub("lab", "bgp", nil)},
		Outputs: []v1.Output{{ObjectMeta: meta("lab", "prom", map[string]string{"out": "yes"}), Spec: v1.OutputSpec{Type: v1.OutputPrometheus,
			Config: &apiextensionsv1.JSON{Raw: []byte(`{"listen":":9804"}`)}}}},
		Profiles:    map[ktypes.NamespacedName]*v1.TargetProfile{{Namespace: "lab", Name: "default"}: profile},
		Credentials: map[ktypes.NamespacedName]map[string][]byte{{Namespace: "lab", Name: "creds"}: {"username": []byte("admin"), "password": []byte("secret")}},
	}
}

// pipeline returns an enabled-or-not Pipeline of cluster "core"; without outputs it gets output "prom", since a
// Pipeline with no output collects nothing.
func pipeline(name string, spec v1.PipelineSpec) v1.GnmicPipeline {
	spec.ClusterRef = "core"
	if len(spec.Outputs.OutputRefs) == 0 && len(spec.Outputs.OutputSelectors) == 0 {
		spec.Outputs.OutputRefs = []string{"prom"}
	}
	return v1.GnmicPipeline{ObjectMeta: meta("lab", name, nil), Spec: spec}
}

func TestBuildResolution(t *testing.T) {
	for name, tc := range map[string]struct {
		pipelines   []v1.GnmicPipeline
		wantTargets []string
		wantSubs    []string
		wantMissing []string
		wantSkipped []string
	}{
		"disabled pipeline resolves nothing": {
			pipelines: []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"ifaces"}})},
		},
		"refs": {
			pipelines:   []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r2", "r1"}, SubscriptionRefs: []string{"ifaces"}})},
			wantTargets: []string{"lab/r1", "lab/r2"}, wantSubs: []string{"lab/p/ifaces"},
		},
		"selector, same namespace only": {
			pipelines:   []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, TargetSelectors: sel("role", "core"), SubscriptionSelectors: sel("set", "base")})},
			wantTargets: []string{"lab/r1", "lab/r3"}, wantSubs: []string{"lab/p/ifaces"},
		},
		"refs then union of selectors": {
			pipelines: []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r2"},
				TargetSelectors: append(sel("role", "core"), sel("role", "edge")...), SubscriptionRefs: []string{"bgp"}})},
			wantTargets: []string{"lab/r1", "lab/r2", "lab/r3"}, wantSubs: []string{"lab/p/bgp"},
		},
		"empty selector matches nothing": {
			pipelines:   []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, TargetSelectors: []metav1.LabelSelector{{}}, SubscriptionRefs: []string{"ifaces"}})},
			wantSubs:    []string{"lab/p/ifaces"},
			wantTargets: nil,
		},
		"missing refs reported": {
			pipelines: []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1", "gone"},
				SubscriptionRefs: []string{"ifaces", "nope"}, Outputs: v1.PipelineOutputs{OutputRefs: []string{"prom", "kafka"}}})},
			wantTargets: []string{"lab/r1"}, wantSubs: []string{"lab/p/ifaces"},
			wantMissing: []string{"Output/kafka", "Subscription/nope", "Target/gone"},
		},
		"targets without subscriptions are skipped": {
			pipelines:   []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1"}})},
			wantSkipped: []string{"lab/r1"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := baseSnapshot()
			s.Pipelines = tc.pipelines
			p := Build(s)
			g.Expect(keys(p.Config.Targets)).To(Equal(tc.wantTargets))
			g.Expect(keys(p.Config.Subscriptions)).To(Equal(tc.wantSubs))
			res := p.Pipelines["lab/p"]
			g.Expect(res.Missing).To(Equal(tc.wantMissing))
			g.Expect(res.Skipped).To(Equal(tc.wantSkipped))
			g.Expect(res.Targets).To(Equal(len(tc.wantTargets)))
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	if out == nil {
		return nil
	}
	sortStrings(out)
	return out
}

func sortStrings(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

func TestBuildTargetConfigUsesGNMIcFieldsAndCredentials(t *testing.T) {
	g := NewWithT(t)
	s := baseSnapshot()
	s.Pipelines = []v1.GnmicPipeline{
		pipeline("a", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"ifaces"},
			Outputs: v1.PipelineOutputs{OutputSelectors: sel("out", "yes")}, Labels: map[string]string{"pipeline": "a"}}),
		pipeline("b", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"bgp"}}),
	}
	p := Build(s)
	cfg := p.Config.Targets["lab/r1"]
	g.Expect(cfg).NotTo(BeNil())
	data, err := json.Marshal(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(MatchJSON(`{
		"name": "lab/r1", "address": "r1:57400", "username": "admin", "password": "secret",
		"timeout": 5000000000, "retry-timer": 2000000000, "insecure": true, "encoding": "json_ietf",
		"subscriptions": ["lab/a/ifaces", "lab/b/bgp"], "outputs": ["lab/prom"],
		"event-tags": {"site": "lab"}
	}`))
	g.Expect(p.PrometheusOutputs).To(Equal([]PrometheusOutput{{Name: "lab/prom", Output: ktypes.NamespacedName{Namespace: "lab", Name: "prom"}, Port: 9804}}))
	// Pipeline a's labels tag only a's data (TestPipelineLabelsStayOnTheirPipelinesDataPath).
	g.Expect(p.Config.Outputs["lab/prom"]).To(Equal(map[string]any{"type": "prometheus", "listen": ":9804",
		"event-processors": []string{"lab/a/labels"}}))

	subData, err := json.Marshal(p.Config.Subscriptions["lab/a/ifaces"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(subData)).To(MatchJSON(`{"name":"lab/a/ifaces","paths":["/interfaces"],"mode":"stream","stream-mode":"sample","sample-interval":10000000000,"outputs":["lab/prom"]}`))
}

func TestBuildOutputsInputsProcessorsTunnels(t *testing.T) {
	g := NewWithT(t)
	s := baseSnapshot()
	s.Outputs = append(s.Outputs, v1.Output{ObjectMeta: meta("lab", "bus", nil), Spec: v1.OutputSpec{Type: v1.OutputNATS,
		Config: &apiextensionsv1.JSON{Raw: []byte(`{"subject":"telemetry"}`)}, ServiceRef: &v1.OutputServiceRef{Name: "nats", Port: "4222"}}})
	s.OutputAddresses = map[ktypes.NamespacedName]string{{Namespace: "lab", Name: "bus"}: "nats.lab.svc:4222"}
	s.Inputs = []v1.Input{{ObjectMeta: meta("lab", "in", nil), Spec: v1.InputSpec{Type: "kafka", Config: &apiextensionsv1.JSON{Raw: []byte(`{"topics":"t"}`)}}}}
	s.Processors = []v1.Processor{
		{ObjectMeta: meta("lab", "drop", map[string]string{"p": "x"}), Spec: v1.ProcessorSpec{Type: "event-drop", Config: &apiextensionsv1.JSON{Raw: []byte(`{"condition":"true"}`)}}},
		{ObjectMeta: meta("lab", "trim", nil), Spec: v1.ProcessorSpec{Type: "event-strings"}},
	}
	s.TunnelTargetPolicies = []v1.TunnelTargetPolicy{{ObjectMeta: meta("lab", "srl", nil), Spec: v1.TunnelTargetPolicySpec{
		Match: &v1.TunnelTargetMatch{Type: "srl", ID: "^leaf"}, Profile: "default"}}}
	s.Pipelines = []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, SubscriptionRefs: []string{"ifaces"},
		TunnelTargetPolicyRefs: []string{"srl"},
		Outputs:                v1.PipelineOutputs{OutputRefs: []string{"bus", "prom"}, ProcessorRefs: []string{"trim"}, ProcessorSelectors: sel("p", "x")},
		Inputs:                 v1.PipelineInputs{InputRefs: []string{"in"}, ProcessorRefs: []string{"drop"}}})}
	p := Build(s)
	g.Expect(p.Config.Outputs["lab/bus"]).To(Equal(map[string]any{"type": "nats", "subject": "telemetry", "address": "nats.lab.svc:4222",
		"event-processors": []string{"lab/trim", "lab/drop"}}))
	g.Expect(p.Config.Processors).To(Equal(map[string]map[string]any{
		"lab/drop": {"event-drop": map[string]any{"condition": "true"}}, "lab/trim": {"event-strings": map[string]any{}}}))
	g.Expect(p.Config.Inputs["lab/in"]).To(Equal(map[string]any{"type": "kafka", "topics": "t",
		"outputs": []string{"lab/bus", "lab/prom"}, "event-processors": []string{"lab/drop"}}))
	m := p.Config.TunnelTargetMatches["lab/srl"]
	g.Expect(m.Type).To(Equal("srl"))
	g.Expect(m.ID).To(Equal("^leaf"))
	g.Expect(*m.Config.Username).To(Equal("admin"))
	g.Expect(m.Config.Subscriptions).To(Equal([]string{"lab/p/ifaces"}))
	g.Expect(p.Pipelines["lab/p"].TunnelTargetPolicies).To(Equal(1))

	// A catch-all policy stored before admission refused it is left out, and said so.
	s.TunnelTargetPolicies[0].Spec.Match = nil
	open := Build(s)
	g.Expect(open.Config.TunnelTargetMatches).To(BeEmpty())
	g.Expect(open.Pipelines["lab/p"].Unsupported).To(ContainElement(ContainSubstring("TunnelTargetPolicy/srl: spec.match")))
	s.TunnelTargetPolicies[0].Spec.Match = &v1.TunnelTargetMatch{Type: "srl", ID: "^leaf"}

	// Inputs without any output are left out: gNMIc would reject the whole apply.
	s.Pipelines[0].Spec.Outputs = v1.PipelineOutputs{}
	g.Expect(Build(s).Config.Inputs).To(BeEmpty())
}

func TestEncodeIsDeterministicAndForPodSplits(t *testing.T) {
	g := NewWithT(t)
	s := baseSnapshot()
	s.Pipelines = []v1.GnmicPipeline{pipeline("p", v1.PipelineSpec{Enabled: true, TargetSelectors: sel("role", "core"), SubscriptionRefs: []string{"ifaces", "bgp"}})}
	// Shuffle the inputs: the encoding must not change.
	a, hashA, err := Encode(Build(s).ForPod([]string{"lab/r1", "lab/r3"}))
	g.Expect(err).NotTo(HaveOccurred())
	s.Targets[0], s.Targets[2] = s.Targets[2], s.Targets[0]
	s.Subscriptions[0], s.Subscriptions[1] = s.Subscriptions[1], s.Subscriptions[0]
	s.Pipelines[0].Spec.SubscriptionRefs = []string{"bgp", "ifaces"}
	b, hashB, err := Encode(Build(s).ForPod([]string{"lab/r3", "lab/r1"}))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(b)).To(Equal(string(a)))
	g.Expect(hashB).To(Equal(hashA))

	one := Build(s).ForPod([]string{"lab/r1", "lab/unknown"})
	g.Expect(keys(one.Targets)).To(Equal([]string{"lab/r1"}))
	g.Expect(one.Subscriptions).To(HaveLen(2))

	empty, _, err := Encode(Empty())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(empty)).To(MatchJSON(`{"targets":{},"subscriptions":{},"outputs":{},"inputs":{},"processors":{},"tunnel-target-matches":{}}`))
}

func TestResolveServiceAddress(t *testing.T) {
	g := NewWithT(t)
	for typ, want := range map[v1.OutputType]string{
		v1.OutputNATS: "nats.bus.svc:4222", v1.OutputKafka: "nats.bus.svc:4222", v1.OutputJetStream: "nats.bus.svc:4222",
		v1.OutputInfluxDB: "http://nats.bus.svc:4222", v1.OutputPrometheusWrite: "http://nats.bus.svc:4222",
	} {
		got, err := ResolveServiceAddress(typ, "nats.bus.svc", 4222)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want))
	}
	_, err := ResolveServiceAddress(v1.OutputFile, "x", 1)
	g.Expect(err).To(HaveOccurred())
}

func TestProfileTLSAndKeepalive(t *testing.T) {
	g := NewWithT(t)
	p := &v1.TargetProfile{ObjectMeta: meta("lab", "tls", nil), Spec: v1.TargetProfileSpec{
		TLS:             &v1.ClientTLS{ServerName: "r1.lab", MinVersion: "1.2", MaxVersion: "1.3", CipherSuites: []string{"TLS_AES_128_GCM_SHA256"}},
		CredentialsRef:  &v1.SecretReference{Name: "tok"},
		GzipCompression: true, Proxy: "socks5://p:1080",
		TCPKeepAlive:  &metav1.Duration{Duration: time.Minute},
		GRPCKeepAlive: &v1.GRPCKeepAlive{Time: &metav1.Duration{Duration: 30 * time.Second}, PermitWithoutStream: true},
	}}
	cfg := profileConfig(p, map[ktypes.NamespacedName]map[string][]byte{{Namespace: "lab", Name: "tok"}: {"token": []byte("t0k")}}, nil)
	g.Expect(cfg.Insecure).To(BeNil())
	g.Expect(cfg.TLSServerName).To(Equal("r1.lab"))
	g.Expect(cfg.TLSMinVersion).To(Equal("1.2"))
	g.Expect(cfg.CipherSuites).To(Equal([]string{"TLS_AES_128_GCM_SHA256"}))
	g.Expect(*cfg.Token).To(Equal("t0k"))
	g.Expect(cfg.Username).To(BeNil())
	g.Expect(*cfg.Gzip).To(BeTrue())
	g.Expect(cfg.Proxy).To(Equal("socks5://p:1080"))
	g.Expect(cfg.TCPKeepalive).To(Equal(time.Minute))
	g.Expect(cfg.GRPCKeepalive.Time).To(Equal(30 * time.Second))
	g.Expect(cfg.GRPCKeepalive.PermitWithoutStream).To(BeTrue())
}
