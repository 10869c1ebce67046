package pipelines

import (
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"google.golang.org/protobuf/proto"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// SpecFromProto is the Pipeline spec that reproduces a Fleet pipeline exactly: spec.name is always set (the CR
// name is derived and may differ), enabled is explicit, and the source is carried over.
func SpecFromProto(p *pipelinev1.Pipeline) fleetv1alpha1.PipelineSpec {
	spec := fleetv1alpha1.PipelineSpec{
		Name:       p.GetName(),
		Contents:   p.GetContents(),
		Matchers:   append([]string(nil), p.GetMatchers()...),
		Enabled:    proto.Bool(p.Enabled == nil || p.GetEnabled()),
		ConfigType: fleetv1alpha1.ConfigTypeAlloy,
	}
	if p.GetConfigType() == pipelinev1.ConfigType_CONFIG_TYPE_OTEL {
		spec.ConfigType = fleetv1alpha1.ConfigTypeOTel
	}
	if src := p.GetSource(); src != nil && src.GetType() != pipelinev1.PipelineSource_SOURCE_TYPE_UNSPECIFIED {
		spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceType(SourceName(src)), Namespace: src.GetNamespace()}
	}
	return spec
}

// IsGrafanaSourced reports whether Grafana manages the pipeline; such pipelines are only ever imported read-only.
func IsGrafanaSourced(p *pipelinev1.Pipeline) bool {
	return p.GetSource().GetType() == SourceTypeGrafana
}

// Importable returns why a Fleet pipeline cannot become a Pipeline CR, or "" when it can: its name must fit
// spec.name, and the CR must pass the same validation admission applies.
func Importable(p *pipelinev1.Pipeline) string {
	if reason := fleetv1alpha1.ValidatePipelineName(p.GetName()); reason != "" {
		return "Fleet pipeline name " + reason
	}
	cr := &fleetv1alpha1.Pipeline{Spec: SpecFromProto(p)}
	if errs, _ := fleetv1alpha1.ValidatePipeline(cr); len(errs) > 0 {
		return errs.ToAggregate().Error()
	}
	return ""
}

// MatchesSelector applies a PipelineDiscovery's selector.
func MatchesSelector(p *pipelinev1.Pipeline, s fleetv1alpha1.PipelineDiscoverySelector) bool {
	if s.Enabled != nil && (p.Enabled == nil || p.GetEnabled()) != *s.Enabled {
		return false
	}
	if s.ConfigType != nil {
		want := pipelinev1.ConfigType_CONFIG_TYPE_ALLOY
		if *s.ConfigType == fleetv1alpha1.ConfigTypeOTel {
			want = pipelinev1.ConfigType_CONFIG_TYPE_OTEL
		}
		got := p.GetConfigType()
		if got == pipelinev1.ConfigType_CONFIG_TYPE_UNSPECIFIED {
			got = pipelinev1.ConfigType_CONFIG_TYPE_ALLOY
		}
		return got == want
	}
	return true
}
