package pipelines

import (
	"testing"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestMarkerOwnership(t *testing.T) {
	cr := &fleetv1alpha1.Pipeline{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "logs", UID: "u-1"}}
	mine := MarkerFor("cluster-1", cr)
	withFields := func(edit func(map[string]*structpb.Value)) *pipelinev1.Pipeline {
		s := mine.Struct()
		edit(s.Fields)
		return &pipelinev1.Pipeline{Name: "logs", Metadata: s}
	}
	for name, tc := range map[string]struct {
		p    *pipelinev1.Pipeline
		owns bool
	}{
		"our marker":                   {&pipelinev1.Pipeline{Metadata: mine.Struct()}, true},
		"no metadata (made elsewhere)": {&pipelinev1.Pipeline{Name: "logs"}, false},
		"other metadata only": {&pipelinev1.Pipeline{Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"team": structpb.NewStringValue("a")}}}, false},
		"other cluster":          {withFields(func(f map[string]*structpb.Value) { f[MarkerCluster] = structpb.NewStringValue("cluster-2") }), false},
		"other namespace":        {withFields(func(f map[string]*structpb.Value) { f[MarkerNamespace] = structpb.NewStringValue("team-b") }), false},
		"recreated CR (new UID)": {withFields(func(f map[string]*structpb.Value) { f[MarkerUID] = structpb.NewStringValue("u-2") }), false},
		"wrong managedBy":        {withFields(func(f map[string]*structpb.Value) { f[MarkerManagedBy] = structpb.NewStringValue("terraform") }), false},
		"uid not a string":       {withFields(func(f map[string]*structpb.Value) { f[MarkerUID] = structpb.NewNumberValue(1) }), false},
		"uid missing":            {withFields(func(f map[string]*structpb.Value) { delete(f, MarkerUID) }), false},
		"extra keys are fine":    {withFields(func(f map[string]*structpb.Value) { f["note"] = structpb.NewStringValue("x") }), true},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(OwnedBy(tc.p, mine)).To(Equal(tc.owns))
		})
	}
	g := NewWithT(t)
	got, ok := MarkerOf(&pipelinev1.Pipeline{Metadata: mine.Struct()})
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal(mine))
	g.Expect(ContentsHash("x")).To(HaveLen(64))
	g.Expect(ContentsHash("x")).NotTo(Equal(ContentsHash("y")))
}

func TestAdoptsOnlyWithTheAnnotation(t *testing.T) {
	for value, want := range map[string]bool{"adopt": true, "read-only": false, "": false, "Adopt": false} {
		p := &fleetv1alpha1.Pipeline{}
		if value != "" {
			p.Annotations = map[string]string{fleetv1alpha1.AnnotationImportMode: value}
		}
		NewWithT(t).Expect(Adopts(p)).To(Equal(want), "import-mode %q", value)
	}
}

// FuzzMarkerOf: any metadata decodes without panicking, and a marker read back rebuilds the same Struct fields.
func FuzzMarkerOf(f *testing.F) {
	f.Add(ManagedByValue, "c", "ns", "n", "u")
	f.Add("", "", "", "", "")
	f.Add(ManagedByValue, "c", "", "n", "u")
	f.Fuzz(func(t *testing.T, managedBy, cluster, ns, name, uid string) {
		s := &structpb.Struct{Fields: map[string]*structpb.Value{
			MarkerManagedBy: structpb.NewStringValue(managedBy), MarkerCluster: structpb.NewStringValue(cluster),
			MarkerNamespace: structpb.NewStringValue(ns), MarkerName: structpb.NewStringValue(name), MarkerUID: structpb.NewStringValue(uid)}}
		m, ok := MarkerOf(&pipelinev1.Pipeline{Metadata: s})
		if !ok {
			return
		}
		if managedBy != ManagedByValue || m.Cluster == "" || m.Namespace == "" || m.Name == "" || m.UID == "" {
			t.Fatalf("incomplete marker accepted: %+v", m)
		}
		if back, ok := MarkerOf(&pipelinev1.Pipeline{Metadata: m.Struct()}); !ok || back != m {
			t.Fatalf("round trip: %+v -> %+v", m, back)
		}
	})
}
