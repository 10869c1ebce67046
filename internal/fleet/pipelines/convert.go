// Package pipelines holds the pure mapping between Pipeline CRs and Fleet Management pipelines: the Fleet name
// under a name scope, the wire message sent on upsert, the status read back, and the sync mode.
package pipelines

import (
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// SourceTypeGrafana is the wire value of a Grafana source. API v1.2.0's PipelineSource.SourceType enum names only
// UNSPECIFIED, GIT and TERRAFORM; Fleet Management uses 3 for Grafana, which proto3's open enums carry as is.
const SourceTypeGrafana = pipelinev1.PipelineSource_SourceType(3)

// Mode is how the controller treats a Pipeline.
type Mode int

// The modes.
const (
	// ModeManaged upserts the pipeline and deletes it with the CR.
	ModeManaged Mode = iota
	// ModeReadOnly never writes or deletes the Fleet pipeline.
	ModeReadOnly
	// ModePaused makes no Fleet call until spec.paused is unset.
	ModePaused
)

// ModeOf returns the Pipeline's mode: read-only (annotation) first, then paused, else managed.
func ModeOf(p *fleetv1alpha1.Pipeline) Mode {
	switch {
	case p.Annotations[fleetv1alpha1.AnnotationImportMode] == fleetv1alpha1.ImportModeReadOnly:
		return ModeReadOnly
	case p.Spec.Paused:
		return ModePaused
	default:
		return ModeManaged
	}
}

// DeletesRemotely reports whether deleting the CR deletes the Fleet pipeline: only managed pipelines that are not
// Grafana-sourced, and only when the controller recorded an ID from an upsert.
func DeletesRemotely(p *fleetv1alpha1.Pipeline) bool {
	if p.Annotations[fleetv1alpha1.AnnotationImportMode] == fleetv1alpha1.ImportModeReadOnly {
		return false
	}
	if p.Spec.Source != nil && p.Spec.Source.Type == fleetv1alpha1.SourceTypeGrafana {
		return false
	}
	return p.Status.ID != ""
}

// FleetName is the pipeline's org-global Fleet name: spec.name or metadata.name, prefixed with "<namespace>."
// when the scope (the name-scope annotation, else defaultScope) is namespace. Namespaces cannot contain dots, so
// prefixed names never collide.
func FleetName(p *fleetv1alpha1.Pipeline, defaultScope string) string {
	name := p.Spec.Name
	if name == "" {
		name = p.Name
	}
	scope := defaultScope
	if v, ok := p.Annotations[fleetv1alpha1.AnnotationNameScope]; ok {
		scope = v
	}
	if scope == fleetv1alpha1.NameScopeNamespace {
		return p.Namespace + "." + name
	}
	return name
}

// ToProto is the complete pipeline sent on upsert: upsert replaces the whole object, so every field is set.
func ToProto(p *fleetv1alpha1.Pipeline, name string) *pipelinev1.Pipeline {
	enabled := p.Spec.Enabled == nil || *p.Spec.Enabled
	out := &pipelinev1.Pipeline{
		Name:       name,
		Contents:   p.Spec.Contents,
		Matchers:   append([]string{}, p.Spec.Matchers...),
		Enabled:    proto.Bool(enabled),
		ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY,
	}
	if p.Spec.ConfigType == fleetv1alpha1.ConfigTypeOTel {
		out.ConfigType = pipelinev1.ConfigType_CONFIG_TYPE_OTEL
	}
	if s := p.Spec.Source; s != nil {
		var t pipelinev1.PipelineSource_SourceType
		switch s.Type {
		case fleetv1alpha1.SourceTypeGit:
			t = pipelinev1.PipelineSource_SOURCE_TYPE_GIT
		case fleetv1alpha1.SourceTypeTerraform:
			t = pipelinev1.PipelineSource_SOURCE_TYPE_TERRAFORM
		case fleetv1alpha1.SourceTypeGrafana:
			t = SourceTypeGrafana
		}
		if t != pipelinev1.PipelineSource_SOURCE_TYPE_UNSPECIFIED {
			out.Source = &pipelinev1.PipelineSource{Type: t, Namespace: s.Namespace}
		}
	}
	return out
}

// SourceName maps a wire source type to the spelling used in status.source.
func SourceName(s *pipelinev1.PipelineSource) string {
	switch s.GetType() {
	case pipelinev1.PipelineSource_SOURCE_TYPE_GIT:
		return string(fleetv1alpha1.SourceTypeGit)
	case pipelinev1.PipelineSource_SOURCE_TYPE_TERRAFORM:
		return string(fleetv1alpha1.SourceTypeTerraform)
	case SourceTypeGrafana:
		return string(fleetv1alpha1.SourceTypeGrafana)
	default:
		return string(fleetv1alpha1.SourceTypeUnspecified)
	}
}

// ApplyStatus copies what Fleet holds for the pipeline into the status: ID, name, source, times, contents hash
// and enabled flag.
func ApplyStatus(st *fleetv1alpha1.PipelineStatus, res *pipelinev1.Pipeline) {
	st.ID = res.GetId()
	st.SyncedName = res.GetName()
	st.Source = SourceName(res.GetSource())
	st.CreatedAt = toTime(res.GetCreatedAt())
	st.UpdatedAt = toTime(res.GetUpdatedAt())
	st.ContentsHash = ContentsHash(res.GetContents())
	enabled := res.Enabled == nil || res.GetEnabled()
	st.Enabled = &enabled
}

func toTime(ts *timestamppb.Timestamp) *metav1.Time {
	if ts == nil {
		return nil
	}
	t := metav1.NewTime(ts.AsTime())
	return &t
}

// Adopts reports whether the Pipeline may take over a Fleet pipeline of its name that it did not create
// (import-mode adopt); deleting such a CR then deletes that pipeline.
func Adopts(p *fleetv1alpha1.Pipeline) bool {
	return p.Annotations[fleetv1alpha1.AnnotationImportMode] == fleetv1alpha1.ImportModeAdopt
}
