package operator

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestControllerNamesAreUniqueAndPrefixedWithTheirGroup(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]bool{}
	for _, c := range Controllers() {
		g.Expect(seen).NotTo(HaveKey(c.Name), "duplicate controller name")
		seen[c.Name] = true
		g.Expect(c.Name).To(HavePrefix(c.Group+"-"), "controllers are named <group>-<kind>")
		g.Expect(Groups).To(ContainElement(c.Group))
		for _, k := range c.Reads {
			g.Expect(string(k)).To(MatchRegexp(`^[a-z]+/[A-Z][A-Za-z]+$`))
		}
	}
}

func TestSelectionResolve(t *testing.T) {
	for name, tc := range map[string]struct {
		sel     Selection
		want    []string
		wantErr string
	}{
		"all groups":            {Selection{Groups: Groups}, allNames(), ""},
		"group disabled":        {Selection{Groups: []string{"gnmic"}}, namesOf("gnmic"), ""},
		"one controller":        {Selection{Groups: Groups, Controllers: []string{"gnmic-target"}}, []string{"gnmic-target"}, ""},
		"controller of off grp": {Selection{Groups: []string{"gitops"}, Controllers: []string{"gnmic-target"}}, nil, ""},
		"unknown group":         {Selection{Groups: []string{"nope"}}, nil, `unknown group "nope"`},
		"unknown controller":    {Selection{Groups: Groups, Controllers: []string{"gnmic-nope"}}, nil, `unknown controller "gnmic-nope"`},
		"discovery without the collector controller": {Selection{Groups: Groups, Controllers: []string{"fleet-collectordiscovery"}}, nil,
			"controller fleet-collectordiscovery requires controller fleet-collector"},
		"discovery with the collector controller": {Selection{Groups: Groups, Controllers: []string{"fleet-collectordiscovery", "fleet-collector"}},
			[]string{"fleet-collector", "fleet-collectordiscovery"}, ""},
		"agents without the quota controller": {Selection{Groups: Groups, Controllers: []string{"agentrax-agentdeployment"}}, nil,
			"controller agentrax-agentdeployment requires controller agentrax-tenantquota"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := tc.sel.Resolve()
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, c := range got {
				names = append(names, c.Name)
			}
			g.Expect(names).To(Equal(tc.want))
		})
	}
}

func TestWebhooksFollowTheKindsEnabledControllersRead(t *testing.T) {
	g := NewWithT(t)
	sel, err := Selection{Groups: Groups, Controllers: []string{"gnmic-target"}}.Resolve()
	g.Expect(err).NotTo(HaveOccurred())
	var kinds []string
	for _, w := range WebhooksFor(sel) {
		kinds = append(kinds, string(w.Kind))
	}
	// gnmic-target reads TargetProfiles too, so both webhooks are served.
	g.Expect(kinds).To(ConsistOf("gnmic/Target", "gnmic/TargetProfile"))
	g.Expect(WebhooksFor(nil)).To(BeEmpty())
	for _, w := range Webhooks() {
		g.Expect(strings.Count(string(w.Kind), "/")).To(Equal(1))
	}
}

func allNames() []string {
	var names []string
	for _, c := range Controllers() {
		names = append(names, c.Name)
	}
	return names
}

func namesOf(group string) []string {
	var names []string
	for _, c := range Controllers() {
		if c.Group == group {
			names = append(names, c.Name)
		}
	}
	return names
}

// The RemoteAttributePolicy (and ExternalAttributeSync) webhooks are served whenever the Collector controller
// runs, even without their own controllers: the Collector controller applies both kinds (upstream served the
// policy webhook only with the policy controller, so unvalidated policies could reach collectors).
func TestPolicyWebhookServedWithTheCollectorControllerAlone(t *testing.T) {
	g := NewWithT(t)
	sel, err := Selection{Groups: Groups, Controllers: []string{"fleet-collector"}}.Resolve()
	g.Expect(err).NotTo(HaveOccurred())
	var kinds []string
	for _, w := range WebhooksFor(sel) {
		kinds = append(kinds, string(w.Kind))
	}
	g.Expect(kinds).To(ConsistOf("fleet/Collector", "fleet/RemoteAttributePolicy", "fleet/ExternalAttributeSync"))
}
