package labeler

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

func TestLabelValue(t *testing.T) {
	for _, tc := range []struct {
		in     string
		hashed bool
	}{
		{"team-a", false},
		{"main", false},
		{"", false},
		{"refs/heads/main", true},
		{"https://github.com/org/repo", true},
		{"deploy/prod", true},
		{strings.Repeat("a", 64), true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			v := LabelValue(tc.in)
			g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty())
			if tc.hashed {
				g.Expect(v).To(HavePrefix("h"))
				g.Expect(v).To(HaveLen(41))
				g.Expect(LabelValue(tc.in)).To(Equal(v), "stable")
			} else {
				g.Expect(v).To(Equal(tc.in))
			}
		})
	}
}

func cm(data string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetName("c")
	u.SetLabels(map[string]string{"app": "x"})
	_ = unstructured.SetNestedField(u.Object, data, "data", "k")
	return u
}

func TestLabel(t *testing.T) {
	g := NewWithT(t)
	pc := pipeline.Context{Tenant: "team-a", Namespace: "team-a", SourceTarget: "web",
		RepoURL: "https://github.com/org/repo", Ref: "refs/heads/main", Path: "deploy/prod", Commit: "abc"}
	u := cm("1")
	g.Expect(Label(u, pc)).To(Succeed())
	l := u.GetLabels()
	g.Expect(l).To(HaveKeyWithValue("app", "x"))
	g.Expect(l).To(HaveKeyWithValue(pipeline.LabelTenant, "team-a"))
	g.Expect(l).To(HaveKeyWithValue(pipeline.LabelSourceTarget, "team-a.web"))
	g.Expect(l[pipeline.LabelRepo]).To(Equal(LabelValue(pc.RepoURL)))
	for k, v := range l {
		g.Expect(validation.IsValidLabelValue(v)).To(BeEmpty(), k)
	}
	a := u.GetAnnotations()
	g.Expect(a).To(HaveKeyWithValue(pipeline.AnnotationRepo, pc.RepoURL))
	g.Expect(a).To(HaveKeyWithValue(pipeline.AnnotationPath, "deploy/prod"))
	g.Expect(a).To(HaveKeyWithValue(pipeline.AnnotationCommit, "abc"))
	hash := a[pipeline.AnnotationHash]
	g.Expect(hash).To(HaveLen(64))

	// Another commit with the same content keeps the hash; changed content changes it; relabeling is idempotent.
	pc2 := pc
	pc2.Commit = "def"
	same := cm("1")
	g.Expect(Label(same, pc2)).To(Succeed())
	g.Expect(same.GetAnnotations()[pipeline.AnnotationHash]).To(Equal(hash))
	g.Expect(Label(u, pc2)).To(Succeed())
	g.Expect(u.GetAnnotations()[pipeline.AnnotationHash]).To(Equal(hash))
	changed := cm("2")
	g.Expect(Label(changed, pc2)).To(Succeed())
	g.Expect(changed.GetAnnotations()[pipeline.AnnotationHash]).NotTo(Equal(hash))
}
