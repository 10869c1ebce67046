package inventory

import (
	"testing"

	. "github.com/onsi/gomega"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
)

// objRef is a reference in namespace "a".
func objRef(apiVersion, kind, name string) *katastromav1.ObjectRef {
	return &katastromav1.ObjectRef{ApiVersion: apiVersion, Kind: kind, Namespace: "a", Name: name}
}

// An apiVersion change is the same object: it must never land on the prune list.
func TestMinusIgnoresTheVersion(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		name      string
		old, want []*katastromav1.ObjectRef
		stale     int
	}{
		{"autoscaling v1 to v2", []*katastromav1.ObjectRef{objRef("autoscaling/v1", "HorizontalPodAutoscaler", "web")},
			[]*katastromav1.ObjectRef{objRef("autoscaling/v2", "HorizontalPodAutoscaler", "web")}, 0},
		{"two-version CRD", []*katastromav1.ObjectRef{objRef("example.org/v1alpha1", "Widget", "w")},
			[]*katastromav1.ObjectRef{objRef("example.org/v1", "Widget", "w")}, 0},
		{"same kind name in another group is another object",
			[]*katastromav1.ObjectRef{objRef("a.example.org/v1", "Widget", "w")},
			[]*katastromav1.ObjectRef{objRef("b.example.org/v1", "Widget", "w")}, 1},
		{"core group", []*katastromav1.ObjectRef{objRef("v1", "ConfigMap", "c"), objRef("v1", "Secret", "c")},
			[]*katastromav1.ObjectRef{objRef("v1", "ConfigMap", "c")}, 1},
	} {
		g.Expect(Minus(tc.old, tc.want)).To(HaveLen(tc.stale), tc.name)
	}
}
