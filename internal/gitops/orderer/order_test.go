package orderer

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func obj(apiVersion, kind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func names(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func TestSort(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       []*unstructured.Unstructured
		reversed bool
		want     []string
	}{
		{
			name: "forward puts namespaces, CRDs, RBAC, config, workloads, then custom resources",
			in: []*unstructured.Unstructured{
				obj("example.com/v1", "Widget", "a", "w"),
				obj("apps/v1", "Deployment", "a", "d"),
				obj("v1", "ConfigMap", "a", "c"),
				obj("rbac.authorization.k8s.io/v1", "Role", "a", "r"),
				obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"),
				obj("v1", "Namespace", "", "a"),
			},
			want: []string{"Namespace/a", "CustomResourceDefinition/widgets.example.com", "Role/r", "ConfigMap/c",
				"Deployment/d", "Widget/w"},
		},
		{
			name: "reversed deletes custom resources before CRDs and workloads before namespaces",
			in: []*unstructured.Unstructured{
				obj("v1", "Namespace", "", "a"),
				obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.example.com"),
				obj("apps/v1", "Deployment", "a", "d"),
				obj("example.com/v1", "Widget", "a", "w"),
			},
			reversed: true,
			want:     []string{"Widget/w", "Deployment/d", "CustomResourceDefinition/widgets.example.com", "Namespace/a"},
		},
		{
			name: "same kind sorts by namespace then name regardless of input order",
			in: []*unstructured.Unstructured{
				obj("v1", "ConfigMap", "b", "x"), obj("v1", "ConfigMap", "a", "z"), obj("v1", "ConfigMap", "a", "y"),
			},
			want: []string{"ConfigMap/y", "ConfigMap/z", "ConfigMap/x"},
		},
		{
			name: "custom resources of different groups sort by group",
			in:   []*unstructured.Unstructured{obj("z.io/v1", "A", "n", "1"), obj("b.io/v1", "Z", "n", "1")},
			want: []string{"Z/1", "A/1"},
		},
		{name: "empty input", in: nil, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			Sort(tc.in, tc.reversed)
			g.Expect(names(tc.in)).To(Equal(tc.want))
		})
	}
}

func TestIsFoundation(t *testing.T) {
	g := NewWithT(t)
	g.Expect(IsFoundation(obj("v1", "Namespace", "", "a"))).To(BeTrue())
	g.Expect(IsFoundation(obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "x"))).To(BeTrue())
	g.Expect(IsFoundation(obj("example.com/v1", "Namespace", "", "a"))).To(BeFalse())
	g.Expect(IsFoundation(obj("v1", "ConfigMap", "a", "a"))).To(BeFalse())
}
