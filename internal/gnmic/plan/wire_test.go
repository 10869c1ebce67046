package plan

import (
	"bytes"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/openconfig/gnmic/pkg/api/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// The wire-fidelity tests push the operator's payload through the stand-in's reproduction of the gNMIc collector
// decoder and compare what gNMIc would hold with what the CRD said. Every leaf field of the CRD types that map
// onto gNMIc config is derived by reflection, so a new field without a case here fails the test.

var (
	metaDuration = reflect.TypeOf(metav1.Duration{})
	metaTime     = reflect.TypeOf(metav1.Time{})
)

// leafPaths lists the JSON paths of every leaf field under t: scalars, durations, times, maps and slices of
// scalars; slices of structs are entered as "name[]".
func leafPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == metaDuration || ft == metaTime:
			out = append(out, path)
		case ft.Kind() == reflect.Struct:
			out = append(out, leafPaths(ft, path)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, leafPaths(ft.Elem(), path+"[]")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

// setLeaf walks path (JSON names) from v, allocating pointers and a one-element slice on the way, and sets the
// leaf to value (converted to the field's type) or to a non-zero value of its type.
func setLeaf(v reflect.Value, path string, value any) {
	name, rest, _ := strings.Cut(path, ".")
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem()
	}
	inSlice := strings.HasSuffix(name, "[]")
	name = strings.TrimSuffix(name, "[]")
	var f reflect.Value
	for i := range v.NumField() {
		if n, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); n == name {
			f = v.Field(i)
		}
	}
	if !f.IsValid() {
		panic("no field " + name)
	}
	if inSlice {
		if f.Len() == 0 {
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
		}
		f = f.Index(0)
	}
	if rest != "" {
		setLeaf(f, rest, value)
		return
	}
	if value == nil {
		value = nonZero(f.Type())
	}
	for f.Kind() == reflect.Pointer {
		if f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
		f = f.Elem()
	}
	f.Set(reflect.ValueOf(value).Convert(f.Type()))
}

func nonZero(t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == metaDuration:
		return metav1.Duration{Duration: 7 * time.Second}
	case t == metaTime:
		return metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	case t.Kind() == reflect.String:
		return "value-1"
	case t.Kind() == reflect.Bool:
		return true
	case t.Kind() == reflect.Uint32:
		return uint32(7)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return []string{"value-1", "value-2"}
	case t.Kind() == reflect.Map:
		return map[string]string{"key-1": "value-1"}
	}
	panic("no non-zero value for " + t.String())
}

// fieldCase says how one CRD field is set (nil: nonZero) and what gNMIc must hold afterwards.
type fieldCase struct {
	value any
	setup func(s *Snapshot)
	check func(g Gomega, req *gnmicserver.ApplyRequest, res *PipelineResult)
}

func wireSnapshot() Snapshot {
	return Snapshot{
		Pipelines: []v1.GnmicPipeline{{ObjectMeta: meta("lab", "pl", nil), Spec: v1.PipelineSpec{ClusterRef: "core", Enabled: true,
			TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"s"}, TunnelTargetPolicyRefs: []string{"t"},
			Outputs: v1.PipelineOutputs{OutputRefs: []string{"o"}}}}},
		Targets:              []v1.Target{{ObjectMeta: meta("lab", "r1", nil), Spec: v1.TargetSpec{Address: "r1:57400", Profile: "p"}}},
		Subscriptions:        []v1.Subscription{{ObjectMeta: meta("lab", "s", nil), Spec: v1.SubscriptionSpec{Paths: []string{"/a"}}}},
		Outputs:              []v1.Output{{ObjectMeta: meta("lab", "o", nil), Spec: v1.OutputSpec{Type: v1.OutputFile}}},
		TunnelTargetPolicies: []v1.TunnelTargetPolicy{{ObjectMeta: meta("lab", "t", nil), Spec: v1.TunnelTargetPolicySpec{Match: &v1.TunnelTargetMatch{ID: "^leaf"}, Profile: "p"}}},
		Profiles:             map[ktypes.NamespacedName]*v1.TargetProfile{{Namespace: "lab", Name: "p"}: {ObjectMeta: meta("lab", "p", nil)}},
		Credentials:          map[ktypes.NamespacedName]map[string][]byte{},
	}
}

// pushThroughGNMIc builds the plan, encodes the apply request of a pod holding every target and decodes it as a
// current collector does; it fails on a refused body and on any key gNMIc would drop.
func pushThroughGNMIc(g Gomega, s Snapshot) (*gnmicserver.ApplyRequest, *PipelineResult) {
	p := Build(s)
	return pushThroughGNMIcPlan(g, p), p.Pipelines["lab/pl"]
}

func pushThroughGNMIcPlan(g Gomega, p *Plan) *gnmicserver.ApplyRequest {
	return &decodeAsGNMIc(g, p).Request
}

// decodeAsGNMIc encodes the apply request of a pod holding every target and decodes it, output and processor
// plugins included, as a current collector does; it fails on a refused body or plugin config and on any key
// gNMIc would drop.
func decodeAsGNMIc(g Gomega, p *Plan) *gnmicserver.Decoded {
	body, _, err := Encode(p.ForPod(sortedKeys(p.Config.Targets)))
	g.Expect(err).NotTo(HaveOccurred())
	d, err := gnmicserver.DecodeApply(bytes.NewReader(body), "")
	g.ExpectWithOffset(2, err).NotTo(HaveOccurred(), "the collector refuses the body:\n%s", body)
	g.ExpectWithOffset(2, d.Unused).To(BeEmpty(), "keys the collector drops")
	g.ExpectWithOffset(2, d.PluginErrors).To(BeEmpty(), "configs the collector's plugins refuse")
	g.ExpectWithOffset(2, gnmicserver.ValidateApply(&d.Request)).To(Succeed(), "the collector answers 400 to:\n%s", body)
	return d
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// profileChecks holds for both a Target and a tunnel target match using the profile.
func profile(check func(g Gomega, tc *types.TargetConfig)) fieldCase {
	return fieldCase{check: func(g Gomega, req *gnmicserver.ApplyRequest, _ *PipelineResult) {
		g.Expect(req.Targets).To(HaveKey("lab/r1"))
		check(g, req.Targets["lab/r1"])
		g.Expect(req.TunnelTargetMatches).To(HaveKey("lab/t"))
		check(g, &req.TunnelTargetMatches["lab/t"].Config)
	}}
}

func subscription(check func(g Gomega, sc *types.SubscriptionConfig)) fieldCase {
	return fieldCase{check: func(g Gomega, req *gnmicserver.ApplyRequest, _ *PipelineResult) {
		g.Expect(req.Subscriptions).To(HaveKey("lab/pl/s"))
		check(g, req.Subscriptions["lab/pl/s"])
	}}
}

var caBundleCase = profile(func(g Gomega, tc *types.TargetConfig) {
	g.Expect(tc.TLSCA).To(HaveValue(And(HavePrefix(TargetTLSDir+"/lab_"), HaveSuffix("_ca.crt"))))
})

func TestEveryMappedFieldSurvivesTheCollectorDecoder(t *testing.T) {
	seven := 7 * time.Second
	profileCases := map[string]fieldCase{
		"credentialsRef.name": {setup: func(s *Snapshot) {
			s.Credentials[ktypes.NamespacedName{Namespace: "lab", Name: "value-1"}] = map[string][]byte{
				"username": []byte("admin"), "password": []byte("pw"), "token": []byte("tok")}
		}, check: profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.Username).To(HaveValue(Equal("admin")))
			g.Expect(tc.Password).To(HaveValue(Equal("pw")))
			g.Expect(tc.Token).To(HaveValue(Equal("tok")))
		}).check},
		"tls.serverName": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.TLSServerName).To(Equal("value-1"))
			g.Expect(tc.Insecure).To(BeNil(), "a profile with tls is not insecure")
		}),
		"tls.minVersion": {value: "1.2", check: profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.TLSMinVersion).To(Equal("1.2")) }).check},
		"tls.maxVersion": {value: "1.3", check: profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.TLSMaxVersion).To(Equal("1.3")) }).check},
		"tls.cipherSuites": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.CipherSuites).To(Equal([]string{"value-1", "value-2"}))
		}),
		// gNMIc reads tls-ca, tls-cert and tls-key as file paths: the PEMs are mounted from the Cluster's
		// target-tls Secret, one file per profile.
		"tls.caBundle.secretRef.name":    caBundleCase,
		"tls.caBundle.secretRef.key":     caBundleCase,
		"tls.caBundle.configMapRef.name": caBundleCase,
		"tls.caBundle.configMapRef.key":  caBundleCase,
		"tls.clientCertRef.name": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.TLSCert).To(HaveValue(And(HavePrefix(TargetTLSDir+"/lab_"), HaveSuffix("_tls.crt"))))
			g.Expect(tc.TLSKey).To(HaveValue(And(HavePrefix(TargetTLSDir+"/lab_"), HaveSuffix("_tls.key"))))
		}),
		"tls.insecureSkipVerify": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.SkipVerify).To(HaveValue(BeTrue()))
		}),
		"timeout":    profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.Timeout).To(Equal(seven)) }),
		"retryTimer": profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.RetryTimer).To(Equal(seven)) }),
		"encoding":   {value: "JSON_IETF", check: profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.Encoding).To(HaveValue(Equal("json_ietf"))) }).check},
		"labels": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.EventTags).To(HaveKeyWithValue("key-1", "value-1"))
		}),
		"proxy":           profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.Proxy).To(Equal("value-1")) }),
		"gzipCompression": profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.Gzip).To(HaveValue(BeTrue())) }),
		"tcpKeepAlive":    profile(func(g Gomega, tc *types.TargetConfig) { g.Expect(tc.TCPKeepalive).To(Equal(seven)) }),
		"grpcKeepAlive.time": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.GRPCKeepalive).NotTo(BeNil())
			g.Expect(tc.GRPCKeepalive.Time).To(Equal(seven))
		}),
		"grpcKeepAlive.timeout": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.GRPCKeepalive).NotTo(BeNil())
			g.Expect(tc.GRPCKeepalive.Timeout).To(Equal(seven))
		}),
		"grpcKeepAlive.permitWithoutStream": profile(func(g Gomega, tc *types.TargetConfig) {
			g.Expect(tc.GRPCKeepalive).NotTo(BeNil())
			g.Expect(tc.GRPCKeepalive.PermitWithoutStream).To(BeTrue())
		}),
	}
	// History cannot reach a collector at all: gNMIc's HistoryConfig holds time.Time values, which its decoder
	// (mapstructure with only the duration hook) refuses in every form. The operator must leave such a
	// Subscription out, rather than break every apply of the Cluster or quietly subscribe to live data, and say why.
	historyRefused := fieldCase{check: func(g Gomega, req *gnmicserver.ApplyRequest, res *PipelineResult) {
		g.Expect(req.Subscriptions).To(BeEmpty())
		g.Expect(res.Unsupported).To(ContainElement(ContainSubstring("Subscription/s")))
	}}
	subscriptionCases := map[string]fieldCase{
		"prefix": subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.Prefix).To(Equal("value-1")) }),
		"target": subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.Target).To(Equal("value-1")) }),
		"paths": subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect(sc.Paths).To(Equal([]string{"value-1", "value-2"}))
		}),
		"mode": {value: "STREAM/ON_CHANGE", check: subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect([]string{sc.Mode, sc.StreamMode}).To(Equal([]string{"stream", "on_change"}))
		}).check},
		"sampleInterval": subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.SampleInterval).To(HaveValue(Equal(seven))) }),
		"heartbeatInterval": subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect(sc.HeartbeatInterval).To(HaveValue(Equal(seven)))
		}),
		"updatesOnly": subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.UpdatesOnly).To(BeTrue()) }),
		"streamSubscriptions[].paths": subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect(sc.StreamSubscriptions).To(HaveLen(1))
			g.Expect(sc.StreamSubscriptions[0].Paths).To(Equal([]string{"value-1", "value-2"}))
		}),
		"streamSubscriptions[].mode": {value: "ON_CHANGE", check: subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect(sc.StreamSubscriptions).To(HaveLen(1))
			g.Expect(sc.StreamSubscriptions[0].StreamMode).To(Equal("on_change"))
		}).check},
		"streamSubscriptions[].sampleInterval": subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect(sc.StreamSubscriptions).To(HaveLen(1))
			g.Expect(sc.StreamSubscriptions[0].SampleInterval).To(HaveValue(Equal(seven)))
		}),
		"streamSubscriptions[].heartbeatInterval": subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect(sc.StreamSubscriptions).To(HaveLen(1))
			g.Expect(sc.StreamSubscriptions[0].HeartbeatInterval).To(HaveValue(Equal(seven)))
		}),
		"streamSubscriptions[].suppressRedundant": subscription(func(g Gomega, sc *types.SubscriptionConfig) {
			g.Expect(sc.StreamSubscriptions).To(HaveLen(1))
			g.Expect(sc.StreamSubscriptions[0].SuppressRedundant).To(BeTrue())
		}),
		"depth":             subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.Depth).To(Equal(uint32(7))) }),
		"encoding":          {value: "PROTO", check: subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.Encoding).To(HaveValue(Equal("proto"))) }).check},
		"qos":               subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.Qos).To(HaveValue(Equal(uint32(7)))) }),
		"suppressRedundant": subscription(func(g Gomega, sc *types.SubscriptionConfig) { g.Expect(sc.SuppressRedundant).To(BeTrue()) }),
		"history.snapshot":  historyRefused,
		"history.start":     historyRefused,
		"history.end":       historyRefused,
	}
	targetCases := map[string]fieldCase{
		"address": {value: "[2001:db8::1]:57400", check: func(g Gomega, req *gnmicserver.ApplyRequest, _ *PipelineResult) {
			g.Expect(req.Targets["lab/r1"].Address).To(Equal("[2001:db8::1]:57400"))
			g.Expect(req.Targets["lab/r1"].Name).To(Equal("lab/r1"))
		}},
		// profile: every profileCases entry reaches the target through it.
		"profile": {value: "p", check: func(g Gomega, req *gnmicserver.ApplyRequest, _ *PipelineResult) {
			g.Expect(req.Targets).To(HaveKey("lab/r1"))
		}},
	}
	tunnelCases := map[string]fieldCase{
		"match.type": {value: "GNMI_GNOI", check: func(g Gomega, req *gnmicserver.ApplyRequest, _ *PipelineResult) {
			g.Expect(req.TunnelTargetMatches["lab/t"].Type).To(Equal("GNMI_GNOI"))
		}},
		"match.id": {value: "^leaf-[0-9]+$", check: func(g Gomega, req *gnmicserver.ApplyRequest, _ *PipelineResult) {
			g.Expect(req.TunnelTargetMatches["lab/t"].ID).To(Equal("^leaf-[0-9]+$"))
		}},
		"profile": {value: "p", check: func(g Gomega, req *gnmicserver.ApplyRequest, _ *PipelineResult) {
			g.Expect(req.TunnelTargetMatches["lab/t"].Config.Subscriptions).To(Equal([]string{"lab/pl/s"}))
			g.Expect(req.TunnelTargetMatches["lab/t"].Config.Outputs).To(Equal([]string{"lab/o"}))
		}},
	}
	for _, kind := range []struct {
		name  string
		spec  reflect.Type
		cases map[string]fieldCase
		set   func(s *Snapshot) reflect.Value
	}{
		{"TargetProfile", reflect.TypeOf(v1.TargetProfileSpec{}), profileCases, func(s *Snapshot) reflect.Value {
			return reflect.ValueOf(&s.Profiles[ktypes.NamespacedName{Namespace: "lab", Name: "p"}].Spec).Elem()
		}},
		{"Subscription", reflect.TypeOf(v1.SubscriptionSpec{}), subscriptionCases, func(s *Snapshot) reflect.Value {
			return reflect.ValueOf(&s.Subscriptions[0].Spec).Elem()
		}},
		{"Target", reflect.TypeOf(v1.TargetSpec{}), targetCases, func(s *Snapshot) reflect.Value { return reflect.ValueOf(&s.Targets[0].Spec).Elem() }},
		{"TunnelTargetPolicy", reflect.TypeOf(v1.TunnelTargetPolicySpec{}), tunnelCases, func(s *Snapshot) reflect.Value {
			return reflect.ValueOf(&s.TunnelTargetPolicies[0].Spec).Elem()
		}},
	} {
		paths := leafPaths(kind.spec, "")
		NewWithT(t).Expect(sortedKeys(kind.cases)).To(ConsistOf(paths), "%s: every CRD field needs a case", kind.name)
		for _, path := range paths {
			t.Run(kind.name+"/"+path, func(t *testing.T) {
				g := NewWithT(t)
				c, ok := kind.cases[path]
				if !ok {
					t.Fatalf("no case for %s", path)
				}
				s := wireSnapshot()
				// The profile is shared; give this run its own copy.
				prof := s.Profiles[ktypes.NamespacedName{Namespace: "lab", Name: "p"}].DeepCopy()
				s.Profiles[ktypes.NamespacedName{Namespace: "lab", Name: "p"}] = prof
				if c.setup != nil {
					c.setup(&s)
				}
				setLeaf(kind.set(&s), path, c.value)
				req, res := pushThroughGNMIc(g, s)
				c.check(g, req, res)
			})
		}
	}
}

// Pipeline labels reach the collector as an event-add-tag processor gNMIc decodes without dropping a key (see
// TestPipelineLabelsStayOnTheirPipelinesDataPath for where they apply).
func TestPipelineLabelsBecomeEventTags(t *testing.T) {
	g := NewWithT(t)
	s := wireSnapshot()
	s.Pipelines[0].Spec.Labels = map[string]string{"pipeline": "core"}
	req, _ := pushThroughGNMIc(g, s)
	name := s.Pipelines[0].Namespace + "/" + s.Pipelines[0].Name + "/labels"
	g.Expect(req.Processors[name]).To(HaveKeyWithValue("event-add-tag", HaveKeyWithValue("add", HaveKeyWithValue("pipeline", "core"))))
}
