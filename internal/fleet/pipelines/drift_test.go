package pipelines

import (
	"testing"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
)

func TestDrift(t *testing.T) {
	base := func(mutate func(*pipelinev1.Pipeline)) *pipelinev1.Pipeline {
		p := &pipelinev1.Pipeline{Name: "logs", Contents: "x {}", Matchers: []string{`env="prod"`}, Enabled: proto.Bool(true),
			ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY,
			Source:     &pipelinev1.PipelineSource{Type: pipelinev1.PipelineSource_SOURCE_TYPE_GIT, Namespace: "repo"}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	for name, tc := range map[string]struct {
		remote *pipelinev1.Pipeline
		want   []string
	}{
		"same":                        {base(nil), nil},
		"gone":                        {nil, []string{"deleted"}},
		"server fills unspecified":    {base(func(p *pipelinev1.Pipeline) { p.ConfigType = pipelinev1.ConfigType_CONFIG_TYPE_UNSPECIFIED }), nil},
		"unset enabled means enabled": {base(func(p *pipelinev1.Pipeline) { p.Enabled = nil }), nil},
		"marker and times ignored": {base(func(p *pipelinev1.Pipeline) {
			p.Id, p.Metadata = proto.String("7"), Marker{Cluster: "c", Namespace: "n", Name: "x", UID: "u"}.Struct()
		}), nil},
		"contents and matchers": {base(func(p *pipelinev1.Pipeline) { p.Contents, p.Matchers = "y {}", nil }), []string{"contents", "matchers"}},
		"disabled":              {base(func(p *pipelinev1.Pipeline) { p.Enabled = proto.Bool(false) }), []string{"enabled"}},
		"renamed":               {base(func(p *pipelinev1.Pipeline) { p.Name = "logs-2" }), []string{"name"}},
		"otel":                  {base(func(p *pipelinev1.Pipeline) { p.ConfigType = pipelinev1.ConfigType_CONFIG_TYPE_OTEL }), []string{"configType"}},
		"source":                {base(func(p *pipelinev1.Pipeline) { p.Source = nil }), []string{"source"}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Drift(base(nil), tc.remote)).To(Equal(tc.want))
		})
	}
}
