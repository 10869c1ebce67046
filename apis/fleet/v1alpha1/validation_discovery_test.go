package v1alpha1

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidatePipelineDiscovery(t *testing.T) {
	bogus := ConfigType("Yaml")
	cases := []struct {
		name string
		spec PipelineDiscoverySpec
		want string
	}{
		{"defaults", PipelineDiscoverySpec{}, ""},
		{"full", PipelineDiscoverySpec{PollInterval: &metav1.Duration{Duration: time.Minute}, TargetNamespace: "mirror",
			ImportMode: DiscoveryReadOnly, Policy: PipelineDiscoveryPolicy{OnPipelineRemoved: RemovalDelete}}, ""},
		{"poll too often", PipelineDiscoverySpec{PollInterval: &metav1.Duration{Duration: 59 * time.Second}}, "spec.pollInterval"},
		{"bad namespace", PipelineDiscoverySpec{TargetNamespace: "Mirror_NS"}, "spec.targetNamespace"},
		{"config type", PipelineDiscoverySpec{Selector: PipelineDiscoverySelector{ConfigType: &bogus}}, "spec.selector.configType"},
		{"import mode", PipelineDiscoverySpec{ImportMode: "Steal"}, "spec.importMode"},
		{"removal", PipelineDiscoverySpec{Policy: PipelineDiscoveryPolicy{OnPipelineRemoved: "Forget"}}, "spec.policy.onPipelineRemoved"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidatePipelineDiscovery(&PipelineDiscovery{Spec: tc.spec})
			if tc.want == "" {
				NewWithT(t).Expect(errs).To(BeEmpty())
			} else {
				NewWithT(t).Expect(errs.ToAggregate()).To(MatchError(ContainSubstring(tc.want)))
			}
		})
	}
}

func TestValidateCollectorDiscovery(t *testing.T) {
	g := NewWithT(t)
	errs, warnings := ValidateCollectorDiscovery(&CollectorDiscovery{})
	g.Expect(errs).To(BeEmpty())
	g.Expect(warnings).To(ConsistOf(ContainSubstring("spec.selector is empty")))
	errs, warnings = ValidateCollectorDiscovery(&CollectorDiscovery{Spec: CollectorDiscoverySpec{
		Selector: PolicySelector{Matchers: []string{`env="prod"`}}}})
	g.Expect(errs).To(BeEmpty())
	g.Expect(warnings).To(BeEmpty())
	errs, _ = ValidateCollectorDiscovery(&CollectorDiscovery{Spec: CollectorDiscoverySpec{
		Selector: PolicySelector{Matchers: []string{`env=="prod"`}, CollectorIDs: []string{""}},
		Policy:   CollectorDiscoveryPolicy{OnCollectorRemoved: "Drop", OnConflict: "Overwrite"},
	}})
	msg := errs.ToAggregate().Error()
	for _, f := range []string{"spec.selector.matchers[0]", "spec.selector.collectorIDs[0]", "spec.policy.onCollectorRemoved", "spec.policy.onConflict"} {
		g.Expect(msg).To(ContainSubstring(f))
	}
}

func TestValidateTenantPolicy(t *testing.T) {
	valid := func() *TenantPolicy {
		return &TenantPolicy{Spec: TenantPolicySpec{
			Subjects: []rbacv1.Subject{{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "team-a"},
				{Kind: "ServiceAccount", Namespace: "ci", Name: "deployer"}, {Kind: "User", Name: "alice"}},
			RequiredMatchers: []string{`team="a"`}}}
	}
	cases := []struct {
		name   string
		mutate func(*TenantPolicy)
		want   string
	}{
		{"valid", func(*TenantPolicy) {}, ""},
		{"no subjects", func(p *TenantPolicy) { p.Spec.Subjects = nil }, "spec.subjects: Required"},
		{"unknown kind", func(p *TenantPolicy) { p.Spec.Subjects[0].Kind = "Team" }, "spec.subjects[0].kind"},
		{"blank name", func(p *TenantPolicy) { p.Spec.Subjects[2].Name = " " }, "spec.subjects[2].name"},
		{"service account without namespace", func(p *TenantPolicy) { p.Spec.Subjects[1].Namespace = "" }, "spec.subjects[1].namespace"},
		{"user with namespace", func(p *TenantPolicy) { p.Spec.Subjects[2].Namespace = "x" }, "spec.subjects[2].namespace"},
		{"no required matchers", func(p *TenantPolicy) { p.Spec.RequiredMatchers = nil }, "spec.requiredMatchers: Required"},
		{"bad matcher", func(p *TenantPolicy) { p.Spec.RequiredMatchers = []string{"team"} }, "spec.requiredMatchers[0]"},
		{"bad selector", func(p *TenantPolicy) {
			p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}, "spec.namespaceSelector"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.mutate(p)
			errs := ValidateTenantPolicy(p)
			if tc.want == "" {
				NewWithT(t).Expect(errs).To(BeEmpty())
			} else {
				NewWithT(t).Expect(errs.ToAggregate()).To(MatchError(ContainSubstring(tc.want)))
			}
		})
	}
}
