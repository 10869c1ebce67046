package pipelines

import (
	"testing"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestSpecFromProtoRoundTrips(t *testing.T) {
	for _, in := range []*pipelinev1.Pipeline{
		{Name: "logs", Contents: "x {}", Matchers: []string{`env="prod"`}, Enabled: proto.Bool(false),
			ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY},
		{Name: "otel", Contents: "service: {}\n", Enabled: proto.Bool(true), ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL,
			Source: &pipelinev1.PipelineSource{Type: pipelinev1.PipelineSource_SOURCE_TYPE_GIT, Namespace: "repo"}},
		{Name: "grafana", Contents: "y {}", Enabled: proto.Bool(true), ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY,
			Source: &pipelinev1.PipelineSource{Type: SourceTypeGrafana, Namespace: "stack"}},
	} {
		t.Run(in.GetName(), func(t *testing.T) {
			g := NewWithT(t)
			cr := &fleetv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Name: "other-name"}, Spec: SpecFromProto(in)}
			out := ToProto(cr, FleetName(cr, fleetv1alpha1.NameScopeNone))
			g.Expect(proto.Equal(out, in)).To(BeTrue(), "got %v", out)
			g.Expect(Importable(in)).To(BeEmpty())
		})
	}
}

func TestImportable(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Importable(&pipelinev1.Pipeline{Name: "has space", Contents: "x {}"})).To(ContainSubstring("whitespace"))
	g.Expect(Importable(&pipelinev1.Pipeline{Name: "ok", Contents: "receivers:\n  otlp: {}"})).To(ContainSubstring("spec.contents"))
	g.Expect(Importable(&pipelinev1.Pipeline{Name: "ok", Contents: "x {}", Matchers: []string{"env==prod"}})).To(ContainSubstring("spec.matchers[0]"))
	g.Expect(IsGrafanaSourced(&pipelinev1.Pipeline{Source: &pipelinev1.PipelineSource{Type: SourceTypeGrafana}})).To(BeTrue())
}

func TestMatchesSelector(t *testing.T) {
	alloy := fleetv1alpha1.ConfigTypeAlloy
	otel := fleetv1alpha1.ConfigTypeOTel
	cases := []struct {
		name string
		p    *pipelinev1.Pipeline
		sel  fleetv1alpha1.PipelineDiscoverySelector
		want bool
	}{
		{"empty selector", &pipelinev1.Pipeline{}, fleetv1alpha1.PipelineDiscoverySelector{}, true},
		{"enabled unset on the wire counts as enabled", &pipelinev1.Pipeline{}, fleetv1alpha1.PipelineDiscoverySelector{Enabled: proto.Bool(true)}, true},
		{"disabled", &pipelinev1.Pipeline{Enabled: proto.Bool(false)}, fleetv1alpha1.PipelineDiscoverySelector{Enabled: proto.Bool(true)}, false},
		{"only disabled", &pipelinev1.Pipeline{Enabled: proto.Bool(false)}, fleetv1alpha1.PipelineDiscoverySelector{Enabled: proto.Bool(false)}, true},
		{"unspecified type is Alloy", &pipelinev1.Pipeline{}, fleetv1alpha1.PipelineDiscoverySelector{ConfigType: &alloy}, true},
		{"otel wanted", &pipelinev1.Pipeline{ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY}, fleetv1alpha1.PipelineDiscoverySelector{ConfigType: &otel}, false},
		{"otel", &pipelinev1.Pipeline{ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL}, fleetv1alpha1.PipelineDiscoverySelector{ConfigType: &otel}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(MatchesSelector(tc.p, tc.sel)).To(Equal(tc.want))
		})
	}
}
