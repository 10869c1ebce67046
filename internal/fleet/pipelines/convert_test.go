package pipelines

import (
	"testing"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func pipeline(mutate func(*fleetv1alpha1.Pipeline)) *fleetv1alpha1.Pipeline {
	p := &fleetv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "logs"},
		Spec: fleetv1alpha1.PipelineSpec{Contents: "x", ConfigType: fleetv1alpha1.ConfigTypeAlloy}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestFleetName(t *testing.T) {
	for name, tc := range map[string]struct {
		p     *fleetv1alpha1.Pipeline
		scope string
		want  string
	}{
		"metadata name":   {pipeline(nil), "none", "logs"},
		"spec name":       {pipeline(func(p *fleetv1alpha1.Pipeline) { p.Spec.Name = "Logs Prod" }), "none", "Logs Prod"},
		"namespace scope": {pipeline(nil), "namespace", "team-a.logs"},
		"annotation overrides": {pipeline(func(p *fleetv1alpha1.Pipeline) {
			p.Annotations = map[string]string{fleetv1alpha1.AnnotationNameScope: "namespace"}
		}), "none", "team-a.logs"},
		"annotation opts out": {pipeline(func(p *fleetv1alpha1.Pipeline) {
			p.Annotations = map[string]string{fleetv1alpha1.AnnotationNameScope: "none"}
		}), "namespace", "logs"},
	} {
		t.Run(name, func(t *testing.T) { NewWithT(t).Expect(FleetName(tc.p, tc.scope)).To(Equal(tc.want)) })
	}
}

func TestToProtoSendsEveryField(t *testing.T) {
	for name, tc := range map[string]struct {
		p    *fleetv1alpha1.Pipeline
		want *pipelinev1.Pipeline
	}{
		"defaults": {pipeline(nil), &pipelinev1.Pipeline{Name: "n", Contents: "x", Matchers: []string{}, Enabled: proto.Bool(true),
			ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY}},
		"everything": {pipeline(func(p *fleetv1alpha1.Pipeline) {
			p.Spec.Enabled = proto.Bool(false)
			p.Spec.ConfigType = fleetv1alpha1.ConfigTypeOTel
			p.Spec.Matchers = []string{`a="b"`}
			p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeTerraform, Namespace: "ws"}
		}), &pipelinev1.Pipeline{Name: "n", Contents: "x", Matchers: []string{`a="b"`}, Enabled: proto.Bool(false),
			ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_OTEL,
			Source:     &pipelinev1.PipelineSource{Type: pipelinev1.PipelineSource_SOURCE_TYPE_TERRAFORM, Namespace: "ws"}}},
		"grafana source as 3": {pipeline(func(p *fleetv1alpha1.Pipeline) {
			p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeGrafana, Namespace: "g"}
		}), &pipelinev1.Pipeline{Name: "n", Contents: "x", Matchers: []string{}, Enabled: proto.Bool(true),
			ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY, Source: &pipelinev1.PipelineSource{Type: 3, Namespace: "g"}}},
		"kubernetes never sent": {pipeline(func(p *fleetv1alpha1.Pipeline) {
			p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeKubernetes}
		}), &pipelinev1.Pipeline{Name: "n", Contents: "x", Matchers: []string{}, Enabled: proto.Bool(true),
			ConfigType: pipelinev1.ConfigType_CONFIG_TYPE_ALLOY}},
	} {
		t.Run(name, func(t *testing.T) {
			got := ToProto(tc.p, "n")
			NewWithT(t).Expect(proto.Equal(got, tc.want)).To(BeTrue(), "got %v", got)
		})
	}
}

func TestModesAndRemoteDeletion(t *testing.T) {
	g := NewWithT(t)
	withID := func(p *fleetv1alpha1.Pipeline) { p.Status.ID = "1001" }
	g.Expect(ModeOf(pipeline(nil))).To(Equal(ModeManaged))
	g.Expect(ModeOf(pipeline(func(p *fleetv1alpha1.Pipeline) { p.Spec.Paused = true }))).To(Equal(ModePaused))
	readOnly := func(p *fleetv1alpha1.Pipeline) {
		withID(p)
		p.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: "read-only"}
	}
	g.Expect(ModeOf(pipeline(readOnly))).To(Equal(ModeReadOnly))
	g.Expect(DeletesRemotely(pipeline(withID))).To(BeTrue())
	g.Expect(DeletesRemotely(pipeline(nil))).To(BeFalse(), "no status.id, nothing to delete")
	g.Expect(DeletesRemotely(pipeline(readOnly))).To(BeFalse())
	g.Expect(DeletesRemotely(pipeline(func(p *fleetv1alpha1.Pipeline) {
		withID(p)
		p.Spec.Source = &fleetv1alpha1.PipelineSource{Type: fleetv1alpha1.SourceTypeGrafana, Namespace: "g"}
	}))).To(BeFalse())
	g.Expect(DeletesRemotely(pipeline(func(p *fleetv1alpha1.Pipeline) {
		p.Annotations = map[string]string{fleetv1alpha1.AnnotationFleetPipelineID: "1001"}
	}))).To(BeFalse(), "the annotation never drives a delete")
}

func TestApplyStatus(t *testing.T) {
	g := NewWithT(t)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &fleetv1alpha1.PipelineStatus{}
	ApplyStatus(st, &pipelinev1.Pipeline{Id: proto.String("1001"), Name: "team-a.logs", CreatedAt: timestamppb.New(created),
		UpdatedAt: timestamppb.New(created.Add(time.Hour)), Source: &pipelinev1.PipelineSource{Type: 3}})
	g.Expect(st.ID).To(Equal("1001"))
	g.Expect(st.SyncedName).To(Equal("team-a.logs"))
	g.Expect(st.Source).To(Equal("Grafana"))
	g.Expect(st.CreatedAt.Time).To(Equal(created))
	g.Expect(st.UpdatedAt.Time).To(Equal(created.Add(time.Hour)))
	ApplyStatus(st, &pipelinev1.Pipeline{Id: proto.String("1")})
	g.Expect(st.CreatedAt).To(BeNil())
	g.Expect(st.Source).To(Equal("Unspecified"))
}
