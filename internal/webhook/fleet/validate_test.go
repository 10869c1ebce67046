package fleet

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

func validSync() *fleetv1alpha1.ExternalAttributeSync {
	return &fleetv1alpha1.ExternalAttributeSync{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "cmdb"},
		Spec: fleetv1alpha1.ExternalAttributeSyncSpec{
			Source: fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindHTTP,
				HTTP: &fleetv1alpha1.HTTPSource{URL: "https://cmdb.example.com/api/collectors?token=abc", RecordsPath: "items"}},
			Schedule: "15m",
			Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`env="prod"`}},
			Mapping:  fleetv1alpha1.AttributeMapping{CollectorIDField: "id", AttributeFields: map[string]string{"rack": "rack"}, RequiredKeys: []string{"rack"}},
		},
	}
}

func TestValidateExternalAttributeSync(t *testing.T) {
	sqlSource := func(s *fleetv1alpha1.ExternalAttributeSync, q string) {
		s.Spec.Source = fleetv1alpha1.ExternalSource{Kind: fleetv1alpha1.SourceKindSQL,
			SQL: &fleetv1alpha1.SQLSource{Driver: fleetv1alpha1.SQLDriverPostgres, Query: q}, SecretRef: &fleetv1alpha1.SecretReference{Name: "db"}}
	}
	cases := []struct {
		name   string
		mutate func(*fleetv1alpha1.ExternalAttributeSync)
		want   string // "" means valid
	}{
		{"valid HTTP", func(*fleetv1alpha1.ExternalAttributeSync) {}, ""},
		{"valid cron", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Schedule = "*/5 * * * *" }, ""},
		{"valid SQL", func(s *fleetv1alpha1.ExternalAttributeSync) { sqlSource(s, "SELECT id, rack FROM inventory") }, ""},
		{"bad schedule", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Schedule = "often" }, "spec.schedule"},
		{"too frequent", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Schedule = "1s" }, "shorter than"},
		{"kind mismatch", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Source.Kind = fleetv1alpha1.SourceKindSQL }, "spec.source.sql: Required"},
		{"both sources", func(s *fleetv1alpha1.ExternalAttributeSync) {
			s.Spec.Source.SQL = &fleetv1alpha1.SQLSource{Driver: "postgres", Query: "SELECT 1"}
		}, "spec.source.sql: Forbidden"},
		{"cross-namespace secret", func(s *fleetv1alpha1.ExternalAttributeSync) {
			s.Spec.Source.SecretRef = &fleetv1alpha1.SecretReference{Name: "x", Namespace: "kube-system"}
		}, "spec.source.secretRef.namespace"},
		{"file URL", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Source.HTTP.URL = "file:///etc/passwd" }, "scheme"},
		{"plain http with credentials", func(s *fleetv1alpha1.ExternalAttributeSync) {
			s.Spec.Source.HTTP.URL = "http://cmdb.example.com/x"
			s.Spec.Source.SecretRef = &fleetv1alpha1.SecretReference{Name: "token"}
		}, "must be https"},
		{"metadata address", func(s *fleetv1alpha1.ExternalAttributeSync) {
			s.Spec.Source.HTTP.URL = "http://169.254.169.254/latest/meta-data"
		}, "link-local"},
		{"cluster service", func(s *fleetv1alpha1.ExternalAttributeSync) {
			s.Spec.Source.HTTP.URL = "https://cmdb.tools.svc.cluster.local/x"
		}, "in-cluster"},
		{"method", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Source.HTTP.Method = "DELETE" }, "spec.source.http.method"},
		{"SQL write", func(s *fleetv1alpha1.ExternalAttributeSync) { sqlSource(s, "SELECT 1; DELETE FROM t") }, "single statement"},
		{"SQL comment bypass", func(s *fleetv1alpha1.ExternalAttributeSync) { sqlSource(s, "/* */ DELETE FROM t") }, "must start with SELECT"},
		{"SQL without secret", func(s *fleetv1alpha1.ExternalAttributeSync) {
			sqlSource(s, "SELECT 1")
			s.Spec.Source.SecretRef = nil
		}, "spec.source.secretRef: Required"},
		{"empty selector", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Selector = fleetv1alpha1.PolicySelector{} }, "spec.selector: Required"},
		{"bad matcher", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Selector.Matchers = []string{`env=="x"`} }, "spec.selector.matchers[0]"},
		{"reserved key", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Mapping.AttributeFields["collector.os"] = "os" }, "reserved"},
		{"required key not mapped", func(s *fleetv1alpha1.ExternalAttributeSync) { s.Spec.Mapping.RequiredKeys = []string{"dc"} }, "spec.mapping.requiredKeys[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := validSync()
			tc.mutate(s)
			errs := ValidateExternalAttributeSync(s, netguard.New())
			if tc.want == "" {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs.ToAggregate()).To(MatchError(ContainSubstring(tc.want)))
			// The URL's path and query (tokens) never come back in the message.
			g.Expect(strings.Contains(errs.ToAggregate().Error(), "token=abc")).To(BeFalse())
		})
	}
}

func TestValidateRemoteAttributePolicy(t *testing.T) {
	valid := func() *fleetv1alpha1.RemoteAttributePolicy {
		return &fleetv1alpha1.RemoteAttributePolicy{Spec: fleetv1alpha1.RemoteAttributePolicySpec{
			Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`env=~"prod|staging"`}}, Attributes: map[string]string{"tier": "gold"}}}
	}
	cases := []struct {
		name   string
		mutate func(*fleetv1alpha1.RemoteAttributePolicy)
		want   string
	}{
		{"valid", func(*fleetv1alpha1.RemoteAttributePolicy) {}, ""},
		{"IDs only", func(p *fleetv1alpha1.RemoteAttributePolicy) {
			p.Spec.Selector = fleetv1alpha1.PolicySelector{CollectorIDs: []string{"edge-1"}}
		}, ""},
		{"no attributes", func(p *fleetv1alpha1.RemoteAttributePolicy) { p.Spec.Attributes = nil }, "spec.attributes: Required"},
		{"empty selector", func(p *fleetv1alpha1.RemoteAttributePolicy) { p.Spec.Selector = fleetv1alpha1.PolicySelector{} }, "spec.selector: Required"},
		{"bad matcher", func(p *fleetv1alpha1.RemoteAttributePolicy) { p.Spec.Selector.Matchers = []string{"env"} }, "spec.selector.matchers[0]"},
		{"blank ID", func(p *fleetv1alpha1.RemoteAttributePolicy) { p.Spec.Selector.CollectorIDs = []string{" "} }, "spec.selector.collectorIDs[0]"},
		{"reserved key", func(p *fleetv1alpha1.RemoteAttributePolicy) { p.Spec.Attributes["collector.id"] = "x" }, "reserved"},
		{"long value", func(p *fleetv1alpha1.RemoteAttributePolicy) { p.Spec.Attributes["x"] = strings.Repeat("v", 1025) }, "spec.attributes[x]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.mutate(p)
			errs := fleetv1alpha1.ValidateRemoteAttributePolicy(p)
			if tc.want == "" {
				NewWithT(t).Expect(errs).To(BeEmpty())
			} else {
				NewWithT(t).Expect(errs.ToAggregate()).To(MatchError(ContainSubstring(tc.want)))
			}
		})
	}
}
