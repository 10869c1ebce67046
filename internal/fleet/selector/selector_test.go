package selector

import (
	"testing"

	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestSelector(t *testing.T) {
	attrs := map[string]string{"env": "prod", "team": "platform", "region": "eu-west-1", "path": `a"b\c`, CollectorIDKey: "edge-1"}
	cases := []struct {
		name     string
		sel      fleetv1alpha1.PolicySelector
		id       string
		want     bool
		parseErr bool
	}{
		{"empty matches nothing", fleetv1alpha1.PolicySelector{}, "edge-1", false, false},
		{"equal", fleetv1alpha1.PolicySelector{Matchers: []string{`env="prod"`}}, "edge-1", true, false},
		{"bare value", fleetv1alpha1.PolicySelector{Matchers: []string{`env=prod`}}, "edge-1", true, false},
		{"AND", fleetv1alpha1.PolicySelector{Matchers: []string{`env="prod"`, `team="sre"`}}, "edge-1", false, false},
		{"regex is anchored", fleetv1alpha1.PolicySelector{Matchers: []string{`region=~"eu"`}}, "edge-1", false, false},
		{"regex full", fleetv1alpha1.PolicySelector{Matchers: []string{`region=~"eu-.*"`}}, "edge-1", true, false},
		{"alternation anchored as a whole", fleetv1alpha1.PolicySelector{Matchers: []string{`team=~"plat|sre"`}}, "edge-1", false, false},
		{"negative regex", fleetv1alpha1.PolicySelector{Matchers: []string{`env!~"dev|test"`}}, "edge-1", true, false},
		{"not equal on missing is true", fleetv1alpha1.PolicySelector{Matchers: []string{`rack!="a"`}}, "edge-1", true, false},
		{"equal empty matches missing", fleetv1alpha1.PolicySelector{Matchers: []string{`rack=""`}}, "edge-1", true, false},
		{"escaped quotes unquoted", fleetv1alpha1.PolicySelector{Matchers: []string{`path="a\"b\\c"`}}, "edge-1", true, false},
		{"synthetic collector.id", fleetv1alpha1.PolicySelector{Matchers: []string{`collector.id=~"edge-.+"`}}, "edge-1", true, false},
		{"ID list ORs", fleetv1alpha1.PolicySelector{Matchers: []string{`env="dev"`}, CollectorIDs: []string{"edge-1"}}, "edge-1", true, false},
		{"ID list alone, other ID", fleetv1alpha1.PolicySelector{CollectorIDs: []string{"edge-2"}}, "edge-1", false, false},
		{"bad matcher", fleetv1alpha1.PolicySelector{Matchers: []string{`env=="prod"`}}, "edge-1", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Compile(tc.sel)
			if tc.parseErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Matches(tc.id, attrs)).To(Equal(tc.want))
		})
	}
}

func TestCollectorAttributes(t *testing.T) {
	c := &fleetv1alpha1.Collector{
		Spec:   fleetv1alpha1.CollectorSpec{ID: "edge-1", RemoteAttributes: map[string]string{"env": "prod", "os": "spec"}},
		Status: fleetv1alpha1.CollectorStatus{LocalAttributes: map[string]string{"os": "linux", "arch": "arm64"}, EffectiveRemoteAttributes: map[string]string{"tier": "gold"}},
	}
	NewWithT(t).Expect(CollectorAttributes(c)).To(Equal(map[string]string{
		"env": "prod", "os": "spec", "arch": "arm64", CollectorIDKey: "edge-1"}))
}
