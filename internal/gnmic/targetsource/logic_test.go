package targetsource

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func TestPruneGuard(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   GuardInput
		want string
	}{
		{"no deletions never guarded", GuardInput{Truncated: true, Discovered: 0, Managed: 10}, ""},
		{"truncated first", GuardInput{Truncated: true, Discovered: 0, Managed: 10, Deletions: 10, MaxDeleteRatio: 50}, GuardTruncated},
		{"empty before ratio", GuardInput{Discovered: 0, Managed: 10, Deletions: 10, MaxDeleteRatio: 50}, GuardEmptySource},
		{"empty allowed, ratio 100", GuardInput{Discovered: 0, AllowEmptySource: true, Managed: 10, Deletions: 10, MaxDeleteRatio: 100}, ""},
		{"empty allowed, ratio still guards", GuardInput{Discovered: 0, AllowEmptySource: true, Managed: 10, Deletions: 10, MaxDeleteRatio: 50}, GuardPruneGuard},
		{"exactly the ratio is allowed", GuardInput{Discovered: 5, Managed: 10, Deletions: 5, MaxDeleteRatio: 50}, ""},
		{"one over the ratio", GuardInput{Discovered: 4, Managed: 10, Deletions: 6, MaxDeleteRatio: 50}, GuardPruneGuard},
		{"ratio 0 holds any delete", GuardInput{Discovered: 99, Managed: 100, Deletions: 1, MaxDeleteRatio: 0}, GuardPruneGuard},
		{"ratio 100 never holds", GuardInput{Discovered: 1, Managed: 100, Deletions: 99, MaxDeleteRatio: 100}, ""},
		{"integer arithmetic 1/3 at 33", GuardInput{Discovered: 2, Managed: 3, Deletions: 1, MaxDeleteRatio: 33}, GuardPruneGuard},
		{"integer arithmetic 1/3 at 34", GuardInput{Discovered: 2, Managed: 3, Deletions: 1, MaxDeleteRatio: 34}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(PruneGuard(tc.in)).To(Equal(tc.want))
		})
	}
}

func TestRetryDelay(t *testing.T) {
	g := NewWithT(t)
	var got []time.Duration
	for failures := 0; failures <= 7; failures++ {
		got = append(got, RetryDelay(5*time.Minute, failures, func() float64 { return 0 }))
	}
	g.Expect(got).To(Equal([]time.Duration{5 * time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute,
		40 * time.Minute, 50 * time.Minute, 50 * time.Minute, 50 * time.Minute}))
	// Jitter is additive and at most 10%.
	g.Expect(RetryDelay(5*time.Minute, 3, func() float64 { return 0.999999 })).To(
		And(BeNumerically(">", 20*time.Minute), BeNumerically("<", 22*time.Minute)))
	g.Expect(RetryDelay(time.Minute, 100, func() float64 { return 0.5 })).To(Equal(10*time.Minute + 30*time.Second))
	g.Expect(EffectiveTimeout(time.Minute, 30*time.Second)).To(Equal(30 * time.Second))
	g.Expect(EffectiveTimeout(time.Second, 30*time.Second)).To(Equal(time.Second))
}

func TestTargetName(t *testing.T) {
	long := strings.Repeat("a", 300)
	for _, tc := range []struct{ source, device, want string }{
		{"inv", "Router1", "inv-router1"},
		{"inv", "core_sw 01", "inv-core-sw-01"},
		{"inv", "--edge--", "inv-edge"},
		{"inv", "a..b", "inv-a.b"},
		{"inv", "a.-b", "inv-a.b"},
		{"inv", "Ünïcode-Rtr", "inv-n-code-rtr"},
		{"inv", "路由器", "inv-" + hashSuffix("路由器")},
		{"inv", "路由器2", "inv-2"},
	} {
		NewWithT(t).Expect(TargetName(tc.source, tc.device)).To(Equal(tc.want), "%s/%s", tc.source, tc.device)
	}
	g := NewWithT(t)
	n := TargetName("inv", long)
	g.Expect(len(n)).To(BeNumerically("<=", 253))
	g.Expect(n).To(HaveSuffix("-" + hashSuffix("inv-"+long)))
	g.Expect(validation.IsDNS1123Subdomain(n)).To(BeEmpty())
	g.Expect(TargetName("inv", long+"b")).NotTo(Equal(n), "long names differing past the cut stay distinct")
}

func TestSanitizeLabels(t *testing.T) {
	g := NewWithT(t)
	prefix := gnmicv1alpha1.AnnotationLabelPrefix
	s := SanitizeLabels(map[string]string{"site": "ams", "role": "spine"}, prefix)
	g.Expect(s.Changed).To(BeFalse())
	g.Expect(s.Annotations).To(BeEmpty())
	g.Expect(s.Labels).To(Equal(map[string]string{"site": "ams", "role": "spine"}))

	s = SanitizeLabels(map[string]string{
		"site":          "Amsterdam Zuid",
		"rack pos":      "12",
		"example.com/x": strings.Repeat("v", 70),
		"rack-pos":      "valid wins",
		"!!!":           "dropped",
	}, prefix)
	g.Expect(s.Changed).To(BeTrue())
	g.Expect(s.Labels).To(Equal(map[string]string{
		"site": "Amsterdam-Zuid", "rack-pos": "valid-wins", "example.com/x": strings.Repeat("v", 63),
	}))
	g.Expect(s.Annotations).To(HaveKeyWithValue(prefix+"site", "Amsterdam Zuid"))
	g.Expect(s.Annotations).To(HaveKeyWithValue(prefix+"example.com.x", strings.Repeat("v", 70)))
	g.Expect(s.Annotations).To(HaveKeyWithValue(prefix+"rack-pos", "valid wins"))

	s = SanitizeLabels(map[string]string{"rack pos": "1"}, prefix)
	g.Expect(s.Labels).To(Equal(map[string]string{"rack-pos": "1"}))
	g.Expect(s.Annotations).To(Equal(map[string]string{prefix + "rack-pos": "rack pos=1"}))

	g.Expect(SanitizeLabelValue("-.x y.-")).To(Equal("x-y"))
	g.Expect(SanitizeLabelValue("日本")).To(Equal(""))
}

func TestBuildPlan(t *testing.T) {
	g := NewWithT(t)
	plan := BuildPlan(Template{Source: "inv", Port: 57400, Profile: "default", Labels: map[string]string{"env": "lab", "site": "x"}},
		[]Device{
			{Name: "r2", Address: "10.0.0.2:6030"},
			{Name: "r1", Address: "10.0.0.1", Port: 0, Labels: map[string]string{"site": "ams", gnmicv1alpha1.LabelManagedBy: "me"}},
			{Name: "R1", Address: "10.0.0.9"},
			{Name: "r3", Address: "2001:db8::1", Port: 9339, Profile: "fast"},
			{Name: "r4", Address: "bad host!"},
			{Name: "r5", Address: "10.0.0.5", Profile: "Not_Valid"},
			{Name: "r6", Address: "r6.example.net:0"},
		})
	names := []string{}
	for _, d := range plan.Targets {
		names = append(names, d.Name)
	}
	// Sorted by name: "R1" < "r1" so R1 wins the name inv-r1.
	g.Expect(names).To(Equal([]string{"inv-r1", "inv-r2", "inv-r3", "inv-r6"}))
	g.Expect(plan.Targets[0].Address).To(Equal("10.0.0.9:57400"))
	g.Expect(plan.Targets[0].Annotations).To(HaveKeyWithValue(gnmicv1alpha1.AnnotationDiscoveredName, "R1"))
	g.Expect(plan.Targets[1].Address).To(Equal("10.0.0.2:6030"))
	g.Expect(plan.Targets[2].Address).To(Equal("[2001:db8::1]:9339"))
	g.Expect(plan.Targets[2].Profile).To(Equal("fast"))
	g.Expect(plan.Targets[3].Address).To(Equal("r6.example.net:57400"), "port 0 is unset, never host:0")
	g.Expect(plan.Targets[0].Labels).To(Equal(map[string]string{"env": "lab", "site": "x",
		gnmicv1alpha1.LabelTargetSource: "inv", gnmicv1alpha1.LabelManagedBy: "targetsource"}))
	g.Expect(plan.Failures).To(ConsistOf(
		Failure{Name: "r1", Reason: ReasonDuplicateName},
		Failure{Name: "r4", Reason: ReasonMissingAddress},
		Failure{Name: "r5", Reason: ReasonInvalidProfile},
	))
	// The source's labels win over the template, the reserved ones over both.
	plan = BuildPlan(Template{Source: "inv", Profile: "p", Labels: map[string]string{"site": "x"}},
		[]Device{{Name: "a", Address: "h", Labels: map[string]string{"site": "ams", gnmicv1alpha1.LabelTargetSource: "other"}}})
	g.Expect(plan.Targets[0].Labels).To(HaveKeyWithValue("site", "ams"))
	g.Expect(plan.Targets[0].Labels).To(HaveKeyWithValue(gnmicv1alpha1.LabelTargetSource, "inv"))
	g.Expect(plan.Targets[0].Annotations).To(HaveKeyWithValue(gnmicv1alpha1.AnnotationSourceLabels, "site"))
}

func TestDigestIsOrderIndependent(t *testing.T) {
	g := NewWithT(t)
	a := Desired{Name: "a", Address: "h:1", Profile: "p", Labels: map[string]string{"x": "1", "y": "2"}}
	b := Desired{Name: "b", Address: "h:2", Profile: "p"}
	g.Expect(Digest([]Desired{a, b})).To(Equal(Digest([]Desired{b, a})))
	g.Expect(Digest([]Desired{a, b})).To(HaveLen(16))
	c := b
	c.Address = "h:3"
	g.Expect(Digest([]Desired{a, c})).NotTo(Equal(Digest([]Desired{a, b})))
}
