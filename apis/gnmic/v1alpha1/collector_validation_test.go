package v1alpha1

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func i32(v int32) *int32 { return &v }

// expectErrors checks that errs is empty when want is empty, else that its text holds every wanted fragment.
func expectErrors(t *testing.T, errs field.ErrorList, want ...string) {
	t.Helper()
	g := NewWithT(t)
	if len(want) == 0 {
		g.Expect(errs).To(BeEmpty())
		return
	}
	g.Expect(errs).NotTo(BeEmpty())
	text := errs.ToAggregate().Error()
	for _, w := range want {
		g.Expect(text).To(ContainSubstring(w))
	}
}

func TestValidateCluster(t *testing.T) {
	issuer := &ClusterTLS{IssuerRef: &IssuerReference{Name: "ca"}}
	for name, tc := range map[string]struct {
		spec ClusterSpec
		want []string
	}{
		"minimal":                  {ClusterSpec{Image: "ghcr.io/openconfig/gnmic:0.45.0"}, nil},
		"blank image":              {ClusterSpec{Image: " "}, []string{"spec.image", "whitespace"}},
		"default image":            {ClusterSpec{}, nil},
		"image with space":         {ClusterSpec{Image: "gnmic latest"}, []string{"spec.image", "whitespace"}},
		"zero replicas":            {ClusterSpec{Image: "i", Replicas: i32(0)}, []string{"spec.replicas", "at least 1"}},
		"rest port too high":       {ClusterSpec{Image: "i", API: &ClusterAPI{RestPort: 70000}}, []string{"spec.api.restPort", "1 to 65535"}},
		"gnmi port negative":       {ClusterSpec{Image: "i", API: &ClusterAPI{GNMIPort: -1}}, []string{"spec.api.gnmiPort"}},
		"gnmi equals rest":         {ClusterSpec{Image: "i", API: &ClusterAPI{RestPort: 9000, GNMIPort: 9000}}, []string{"spec.api.gnmiPort", "differ from restPort"}},
		"gnmi equals default":      {ClusterSpec{Image: "i", API: &ClusterAPI{GNMIPort: 7890}}, []string{"differ from restPort"}},
		"api tls operator-managed": {ClusterSpec{Image: "i", API: &ClusterAPI{TLS: &ClusterTLS{}}, ClientTLS: issuer}, nil},
		"api tls with issuer":      {ClusterSpec{Image: "i", API: &ClusterAPI{TLS: issuer}}, nil},
		"api tls with bundle":      {ClusterSpec{Image: "i", API: &ClusterAPI{TLS: &ClusterTLS{BundleRef: "ca"}}}, []string{"spec.api.tls.bundleRef: Forbidden"}},
		"api tls with csi":         {ClusterSpec{Image: "i", API: &ClusterAPI{TLS: &ClusterTLS{UseCSIDriver: true}}}, []string{"spec.api.tls.useCSIDriver: Forbidden"}},
		"client tls operator":      {ClusterSpec{Image: "i", ClientTLS: &ClusterTLS{}}, nil},
		"client tls with bundle":   {ClusterSpec{Image: "i", ClientTLS: &ClusterTLS{BundleRef: "ca"}}, []string{"spec.clientTLS.bundleRef: Forbidden"}},
		"client tls with csi":      {ClusterSpec{Image: "i", ClientTLS: &ClusterTLS{UseCSIDriver: true}}, []string{"spec.clientTLS.useCSIDriver: Forbidden"}},
		"tunnel port zero":         {ClusterSpec{Image: "i", GRPCTunnel: &GRPCTunnel{}}, []string{"spec.grpcTunnel.port"}},
		"tunnel on rest port":      {ClusterSpec{Image: "i", GRPCTunnel: &GRPCTunnel{Port: 7890}}, []string{"spec.grpcTunnel.port", "differ"}},
		"tunnel tls operator":      {ClusterSpec{Image: "i", GRPCTunnel: &GRPCTunnel{Port: 57401, TLS: &ClusterTLS{}}}, nil},
		"tunnel tls with issuer":   {ClusterSpec{Image: "i", GRPCTunnel: &GRPCTunnel{Port: 57401, TLS: issuer}}, nil},
		"tunnel tls with bundle":   {ClusterSpec{Image: "i", GRPCTunnel: &GRPCTunnel{Port: 57401, TLS: &ClusterTLS{BundleRef: "ca"}}}, []string{"spec.grpcTunnel.tls.bundleRef: Forbidden"}},
		"capacity zero":            {ClusterSpec{Image: "i", TargetDistribution: &TargetDistribution{PodCapacity: i32(0)}}, []string{"spec.targetDistribution.podCapacity"}},
		"negative grace period": {ClusterSpec{Image: "i", TargetDistribution: &TargetDistribution{
			UnreadyGracePeriod: &metav1.Duration{Duration: -time.Second}}}, []string{"spec.targetDistribution.unreadyGracePeriod"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrors(t, ValidateCluster(&Cluster{Spec: tc.spec}), tc.want...) })
	}
}

func TestValidatePipeline(t *testing.T) {
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "site", Operator: "Near"}}}
	ok := metav1.LabelSelector{MatchLabels: map[string]string{"site": "lab"}}
	for name, tc := range map[string]struct {
		spec PipelineSpec
		want []string
	}{
		"minimal":            {PipelineSpec{ClusterRef: "core"}, nil},
		"full":               {PipelineSpec{ClusterRef: "core", Enabled: true, TargetRefs: []string{"r1"}, TargetSelectors: []metav1.LabelSelector{ok, {}}, SubscriptionRefs: []string{"ifaces"}}, nil},
		"no cluster":         {PipelineSpec{}, []string{"spec.clusterRef: Required"}},
		"bad cluster":        {PipelineSpec{ClusterRef: "Core"}, []string{"spec.clusterRef"}},
		"empty ref":          {PipelineSpec{ClusterRef: "c", TargetRefs: []string{""}}, []string{"spec.targetRefs[0]: Required"}},
		"duplicate ref":      {PipelineSpec{ClusterRef: "c", SubscriptionRefs: []string{"a", "a"}}, []string{"spec.subscriptionRefs[1]: Duplicate"}},
		"bad selector":       {PipelineSpec{ClusterRef: "c", TargetSelectors: []metav1.LabelSelector{ok, bad}}, []string{"spec.targetSelectors[1]"}},
		"bad output ref":     {PipelineSpec{ClusterRef: "c", Outputs: PipelineOutputs{OutputRefs: []string{"Prom"}}}, []string{"spec.outputs.outputRefs[0]"}},
		"bad input selector": {PipelineSpec{ClusterRef: "c", Inputs: PipelineInputs{ProcessorSelectors: []metav1.LabelSelector{bad}}}, []string{"spec.inputs.processorSelectors[0]"}},
		"bad tunnel ref":     {PipelineSpec{ClusterRef: "c", TunnelTargetPolicyRefs: []string{"a b"}}, []string{"spec.tunnelTargetPolicyRefs[0]"}},
		"bad label":          {PipelineSpec{ClusterRef: "c", Labels: map[string]string{"a b": "x"}}, []string{"spec.labels[a b]"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrors(t, ValidatePipeline(&GnmicPipeline{Spec: tc.spec}), tc.want...) })
	}
}

func TestValidateSubscription(t *testing.T) {
	d := &metav1.Duration{Duration: 10 * time.Second}
	qos := uint32(64)
	now := metav1.NewTime(time.Unix(1000, 0))
	earlier := metav1.NewTime(time.Unix(10, 0))
	for name, tc := range map[string]struct {
		spec SubscriptionSpec
		want []string
	}{
		"stream default":        {SubscriptionSpec{Paths: []string{"/interfaces"}}, nil},
		"sample with interval":  {SubscriptionSpec{Paths: []string{"/a"}, Mode: "STREAM/SAMPLE", SampleInterval: d}, nil},
		"lowercase form":        {SubscriptionSpec{Paths: []string{"/a"}, Mode: "stream/on_change"}, nil},
		"once":                  {SubscriptionSpec{Paths: []string{"/a"}, Mode: "ONCE"}, nil},
		"poll":                  {SubscriptionSpec{Paths: []string{"/a"}, Mode: "POLL"}, nil},
		"unknown mode":          {SubscriptionSpec{Paths: []string{"/a"}, Mode: "STREAM/FAST"}, []string{"spec.mode: Unsupported value"}},
		"once/sample":           {SubscriptionSpec{Paths: []string{"/a"}, Mode: "ONCE/SAMPLE"}, []string{"spec.mode"}},
		"no paths":              {SubscriptionSpec{}, []string{"spec.paths: Required"}},
		"blank path":            {SubscriptionSpec{Paths: []string{" "}}, []string{"spec.paths[0]"}},
		"interval on on_change": {SubscriptionSpec{Paths: []string{"/a"}, Mode: "STREAM/ON_CHANGE", SampleInterval: d}, []string{"spec.sampleInterval", "STREAM/SAMPLE"}},
		"zero interval":         {SubscriptionSpec{Paths: []string{"/a"}, SampleInterval: &metav1.Duration{}}, []string{"spec.sampleInterval", "greater than zero"}},
		"stream subs":           {SubscriptionSpec{Mode: "STREAM", StreamSubscriptions: []StreamSubscription{{Paths: []string{"/a"}, Mode: "SAMPLE", SampleInterval: d}}}, nil},
		"stream subs on once":   {SubscriptionSpec{Mode: "ONCE", StreamSubscriptions: []StreamSubscription{{Paths: []string{"/a"}}}}, []string{"spec.streamSubscriptions", "only allowed with mode STREAM"}},
		"stream subs and paths": {SubscriptionSpec{Paths: []string{"/a"}, StreamSubscriptions: []StreamSubscription{{Paths: []string{"/b"}}}}, []string{"spec.paths: Forbidden"}},
		"stream sub bad mode":   {SubscriptionSpec{StreamSubscriptions: []StreamSubscription{{Paths: []string{"/b"}, Mode: "POLL"}}}, []string{"spec.streamSubscriptions[0].mode"}},
		"stream sub no paths":   {SubscriptionSpec{StreamSubscriptions: []StreamSubscription{{}}}, []string{"spec.streamSubscriptions[0].paths"}},
		"qos too high":          {SubscriptionSpec{Paths: []string{"/a"}, QoS: &qos}, []string{"spec.qos"}},
		"history both":          {SubscriptionSpec{Paths: []string{"/a"}, History: &SubscriptionHistory{Snapshot: &now, Start: &earlier}}, []string{"spec.history", "exclusive"}},
		"history reversed":      {SubscriptionSpec{Paths: []string{"/a"}, History: &SubscriptionHistory{Start: &now, End: &earlier}}, []string{"spec.history.end"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrors(t, ValidateSubscription(&Subscription{Spec: tc.spec}), tc.want...) })
	}
}

func TestSplitMode(t *testing.T) {
	for in, want := range map[SubscriptionMode][2]string{
		"STREAM/SAMPLE": {"STREAM", "SAMPLE"}, "stream/on_change": {"STREAM", "ON_CHANGE"}, "ONCE": {"ONCE", ""}, "": {"", ""},
	} {
		m, s := SplitMode(in)
		NewWithT(t).Expect([2]string{m, s}).To(Equal(want), string(in))
	}
}

func raw(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }

func TestValidateOutput(t *testing.T) {
	for name, tc := range map[string]struct {
		spec OutputSpec
		want []string
	}{
		"prometheus":                {OutputSpec{Type: "prometheus", Config: raw(`{"listen":":9804"}`), Service: &ServiceTemplate{Type: "ClusterIP"}}, nil},
		"unknown type":              {OutputSpec{Type: "splunk"}, []string{"spec.type: Unsupported value"}},
		"config not object":         {OutputSpec{Type: "file", Config: raw(`[1,2]`)}, []string{"spec.config", "JSON object"}},
		"type inside config":        {OutputSpec{Type: "file", Config: raw(`{"type":"kafka"}`)}, []string{"spec.config.type: Forbidden"}},
		"service on kafka":          {OutputSpec{Type: "kafka", Service: &ServiceTemplate{}}, []string{"spec.service: Forbidden", "only prometheus"}},
		"nats service ref":          {OutputSpec{Type: "nats", ServiceRef: &OutputServiceRef{Name: "nats", Port: "4222"}}, nil},
		"kafka named port":          {OutputSpec{Type: "kafka", ServiceRef: &OutputServiceRef{Name: "kafka", Namespace: "bus", Port: "broker"}}, nil},
		"influx url":                {OutputSpec{Type: "influxdb", ServiceRef: &OutputServiceRef{URL: "http://influx:8086"}}, nil},
		"prom write selector":       {OutputSpec{Type: "prometheus_write", ServiceSelector: &OutputServiceSelector{MatchLabels: map[string]string{"app": "mimir"}, Port: "http"}}, nil},
		"ref on prometheus":         {OutputSpec{Type: "prometheus", ServiceRef: &OutputServiceRef{Name: "x", Port: "1"}}, []string{"spec.serviceRef: Forbidden", "not prometheus"}},
		"ref on file":               {OutputSpec{Type: "file", ServiceSelector: &OutputServiceSelector{MatchLabels: map[string]string{"a": "b"}, Port: "1"}}, []string{"not file"}},
		"ref and selector":          {OutputSpec{Type: "nats", ServiceRef: &OutputServiceRef{Name: "n", Port: "1"}, ServiceSelector: &OutputServiceSelector{MatchLabels: map[string]string{"a": "b"}, Port: "1"}}, []string{"spec.serviceSelector: Forbidden"}},
		"address and ref":           {OutputSpec{Type: "nats", Config: raw(`{"address":"nats:4222"}`), ServiceRef: &OutputServiceRef{Name: "n", Port: "4222"}}, []string{"spec.config.address: Forbidden"}},
		"url and ref on influx":     {OutputSpec{Type: "influxdb", Config: raw(`{"url":"http://x"}`), ServiceRef: &OutputServiceRef{Name: "n", Port: "8086"}}, []string{"spec.config.url: Forbidden"}},
		"ref without port":          {OutputSpec{Type: "nats", ServiceRef: &OutputServiceRef{Name: "n"}}, []string{"spec.serviceRef.port: Required"}},
		"ref port out of range":     {OutputSpec{Type: "nats", ServiceRef: &OutputServiceRef{Name: "n", Port: "70000"}}, []string{"spec.serviceRef.port"}},
		"ref url and name":          {OutputSpec{Type: "nats", ServiceRef: &OutputServiceRef{Name: "n", URL: "nats://x:1"}}, []string{"spec.serviceRef.url: Forbidden"}},
		"ref relative url":          {OutputSpec{Type: "influxdb", ServiceRef: &OutputServiceRef{URL: "/x"}}, []string{"spec.serviceRef.url"}},
		"selector without labels":   {OutputSpec{Type: "nats", ServiceSelector: &OutputServiceSelector{Port: "1"}}, []string{"spec.serviceSelector.matchLabels: Required"}},
		"selector bad namespace":    {OutputSpec{Type: "nats", ServiceSelector: &OutputServiceSelector{MatchLabels: map[string]string{"a": "b"}, Port: "1", Namespace: "A_B"}}, []string{"spec.serviceSelector.namespace"}},
		"selector bad port name":    {OutputSpec{Type: "nats", ServiceSelector: &OutputServiceSelector{MatchLabels: map[string]string{"a": "b"}, Port: "Not_A_Port"}}, []string{"spec.serviceSelector.port"}},
		"address without ref is ok": {OutputSpec{Type: "nats", Config: raw(`{"address":"nats:4222"}`)}, nil},
	} {
		t.Run(name, func(t *testing.T) { expectErrors(t, ValidateOutput(&Output{Spec: tc.spec}), tc.want...) })
	}
}

func TestOutputAddressKey(t *testing.T) {
	g := NewWithT(t)
	for typ, want := range map[OutputType][2]string{
		OutputNATS: {"address", ""}, OutputJetStream: {"address", ""}, OutputKafka: {"address", ""},
		OutputPrometheusWrite: {"url", "http"}, OutputInfluxDB: {"url", "http"},
	} {
		key, scheme, ok := OutputAddressKey(typ)
		g.Expect(ok).To(BeTrue())
		g.Expect([2]string{key, scheme}).To(Equal(want), string(typ))
	}
	for _, typ := range []OutputType{OutputFile, OutputPrometheus, OutputTCP, OutputUDP} {
		_, _, ok := OutputAddressKey(typ)
		g.Expect(ok).To(BeFalse(), string(typ))
	}
}

func TestValidateInputProcessorTunnelPolicy(t *testing.T) {
	expectErrors(t, ValidateInput(&Input{Spec: InputSpec{Type: "nats", Config: raw(`{"address":"nats:4222","subject":"telemetry"}`)}}))
	expectErrors(t, ValidateInput(&Input{Spec: InputSpec{Type: "file"}}), "spec.type: Unsupported value")
	expectErrors(t, ValidateInput(&Input{Spec: InputSpec{Type: "kafka", Config: raw(`"x"`)}}), "spec.config")
	expectErrors(t, ValidateProcessor(&Processor{Spec: ProcessorSpec{Type: "event-strings", Config: raw(`{"value-names":[".*"]}`)}}))
	expectErrors(t, ValidateProcessor(&Processor{Spec: ProcessorSpec{Type: "strings"}}), "spec.type", "event processor")
	// A well-formed name gNMIc has no processor for fails every collector's processor setup: refuse it here.
	expectErrors(t, ValidateProcessor(&Processor{Spec: ProcessorSpec{Type: "event-stringz"}}), "spec.type", "event-strings")
	for _, typ := range ProcessorTypes {
		expectErrors(t, ValidateProcessor(&Processor{Spec: ProcessorSpec{Type: typ}}))
	}
	expectErrors(t, ValidateTunnelTargetPolicy(&TunnelTargetPolicy{Spec: TunnelTargetPolicySpec{Match: &TunnelTargetMatch{Type: "srl.*", ID: "^leaf"}, Profile: "p"}}))
	expectErrors(t, ValidateTunnelTargetPolicy(&TunnelTargetPolicy{Spec: TunnelTargetPolicySpec{Match: &TunnelTargetMatch{ID: "(["}}}), "spec.match.id", "regular expression")
	expectErrors(t, ValidateTunnelTargetPolicy(&TunnelTargetPolicy{Spec: TunnelTargetPolicySpec{Match: &TunnelTargetMatch{ID: "^leaf"}, Profile: "Bad Profile"}}), "spec.profile")
}

func TestValidateClusterTunnelClientCA(t *testing.T) {
	cluster := func(tls *ClusterTLS, ref *KeyReference) *Cluster {
		return &Cluster{Spec: ClusterSpec{Image: "gnmic", GRPCTunnel: &GRPCTunnel{Port: 57401, TLS: tls, ClientCARef: ref}}}
	}
	expectErrors(t, ValidateCluster(cluster(&ClusterTLS{}, &KeyReference{Name: "device-ca"})))
	expectErrors(t, ValidateCluster(cluster(nil, &KeyReference{Name: "device-ca"})), "spec.grpcTunnel.tls", "clientCARef")
	expectErrors(t, ValidateCluster(cluster(&ClusterTLS{}, &KeyReference{Name: "Bad Name"})), "spec.grpcTunnel.clientCARef.name")
}

// A tunnel server builds a target, with the profile's credentials, for every peer whose ID a policy matches: a
// policy that matches every ID admits any peer that registers.
func TestValidateTunnelTargetPolicyAdmitsOnlyKnownDevices(t *testing.T) {
	for name, tc := range map[string]struct {
		match *TunnelTargetMatch
		want  []string
	}{
		"no match":               {nil, []string{"spec.match", "every device"}},
		"no id":                  {&TunnelTargetMatch{Type: "srlinux"}, []string{"spec.match.id", "every device"}},
		"id matching everything": {&TunnelTargetMatch{ID: ".*"}, []string{"spec.match.id", "every device"}},
		"optional id":            {&TunnelTargetMatch{ID: "^(leaf)?"}, []string{"spec.match.id", "every device"}},
		"anchored id":            {&TunnelTargetMatch{Type: "srlinux", ID: "^leaf[0-9]+$"}, nil},
		"prefix id":              {&TunnelTargetMatch{ID: "^leaf"}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			expectErrors(t, ValidateTunnelTargetPolicy(&TunnelTargetPolicy{Spec: TunnelTargetPolicySpec{Match: tc.match, Profile: "p"}}), tc.want...)
		})
	}
}

// allUnderSpec fails when an error names no field under spec.
func allUnderSpec(t *testing.T, errs field.ErrorList) {
	for _, e := range errs {
		if !strings.HasPrefix(e.Field, "spec.") {
			t.Fatalf("error without a spec field: %v", e)
		}
	}
}

func FuzzValidateCluster(f *testing.F) {
	f.Add("gnmic:0.45.0", int32(1), int32(7890), int32(0), int32(0), true, int32(1))
	f.Add("", int32(0), int32(70000), int32(7890), int32(7890), false, int32(0))
	f.Fuzz(func(t *testing.T, image string, replicas, rest, gnmi, tunnel int32, tls bool, capacity int32) {
		c := &Cluster{Spec: ClusterSpec{Image: image, Replicas: &replicas, API: &ClusterAPI{RestPort: rest, GNMIPort: gnmi},
			TargetDistribution: &TargetDistribution{PodCapacity: &capacity}}}
		if tunnel != 0 {
			c.Spec.GRPCTunnel = &GRPCTunnel{Port: tunnel}
		}
		if tls {
			// A CA bundle for the REST API is refused: the operator trusts the issuer's ca.crt.
			c.Spec.API.TLS = &ClusterTLS{IssuerRef: &IssuerReference{Name: "ca"}, BundleRef: "ca"}
		}
		errs := ValidateCluster(c)
		allUnderSpec(t, errs)
		if len(errs) == 0 && (replicas < 1 || (gnmi != 0 && gnmi == c.RestPort()) || tls) {
			t.Fatalf("accepted an invalid cluster %+v", c.Spec)
		}
	})
}

func FuzzValidateSubscription(f *testing.F) {
	for _, m := range []string{"STREAM", "STREAM/SAMPLE", "ONCE", "stream/on_change", "POLL/SAMPLE", "", "/"} {
		f.Add(m, "/interfaces", int64(time.Second), "SAMPLE")
	}
	f.Fuzz(func(t *testing.T, mode, path string, interval int64, streamMode string) {
		s := &Subscription{Spec: SubscriptionSpec{Mode: SubscriptionMode(mode), Paths: []string{path},
			SampleInterval: &metav1.Duration{Duration: time.Duration(interval)}}}
		errs := ValidateSubscription(s)
		allUnderSpec(t, errs)
		s.Spec.Paths = nil
		s.Spec.StreamSubscriptions = []StreamSubscription{{Paths: []string{path}, Mode: StreamMode(streamMode)}}
		allUnderSpec(t, ValidateSubscription(s))
	})
}

func FuzzValidateOutput(f *testing.F) {
	f.Add("nats", `{"subject":"x"}`, "nats", "4222", "", "")
	f.Add("influxdb", `{"url":"http://x"}`, "", "", "http://influx:8086", "a")
	f.Add("file", `[]`, "", "", "", "")
	f.Fuzz(func(t *testing.T, typ, config, name, port, url, label string) {
		o := &Output{Spec: OutputSpec{Type: OutputType(typ), Config: raw(config)}}
		if name != "" || url != "" {
			o.Spec.ServiceRef = &OutputServiceRef{Name: name, Port: port, URL: url}
		}
		if label != "" {
			o.Spec.ServiceSelector = &OutputServiceSelector{MatchLabels: map[string]string{label: label}, Port: port}
		}
		allUnderSpec(t, ValidateOutput(o))
	})
}

func FuzzValidatePipeline(f *testing.F) {
	f.Add("core", "r1", "site", "In", "lab")
	f.Add("", "", "", "Near", "")
	f.Fuzz(func(t *testing.T, cluster, ref, key, op, value string) {
		sel := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOperator(op), Values: []string{value}}}}
		p := &GnmicPipeline{Spec: PipelineSpec{ClusterRef: cluster, TargetRefs: []string{ref}, TargetSelectors: []metav1.LabelSelector{sel},
			Outputs: PipelineOutputs{OutputSelectors: []metav1.LabelSelector{sel}}}}
		allUnderSpec(t, ValidatePipeline(p))
	})
}

func FuzzValidateTunnelTargetPolicy(f *testing.F) {
	f.Add("srl.*", "^leaf[0-9]+$", "default")
	f.Add("([", "", "Bad")
	f.Fuzz(func(t *testing.T, typ, id, profile string) {
		allUnderSpec(t, ValidateTunnelTargetPolicy(&TunnelTargetPolicy{Spec: TunnelTargetPolicySpec{Match: &TunnelTargetMatch{Type: typ, ID: id}, Profile: profile}}))
	})
}
