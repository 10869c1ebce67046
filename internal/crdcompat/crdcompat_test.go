package crdcompat

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func crd(versions ...apiextensionsv1.CustomResourceDefinitionVersion) apiextensionsv1.CustomResourceDefinition {
	return apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: versions}}
}

func version(name string, storage bool, specFields ...string) apiextensionsv1.CustomResourceDefinitionVersion {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	for _, f := range specFields {
		spec.Properties[f] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	}
	spec.Properties["items"] = apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
		Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"address": {Type: "string"}}}}}
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}}}}
}

func TestDropped(t *testing.T) {
	released := Of([]apiextensionsv1.CustomResourceDefinition{crd(version("v1alpha1", true, "replicas", "image"))})
	cases := map[string]struct {
		next []apiextensionsv1.CustomResourceDefinition
		want []string
	}{
		"unchanged":     {[]apiextensionsv1.CustomResourceDefinition{crd(version("v1alpha1", true, "replicas", "image"))}, nil},
		"a field added": {[]apiextensionsv1.CustomResourceDefinition{crd(version("v1alpha1", true, "replicas", "image", "paused"))}, nil},
		"a new storage version beside the old one": {[]apiextensionsv1.CustomResourceDefinition{crd(
			version("v1alpha1", false, "replicas", "image"), version("v1beta1", true, "replicas"))}, nil},
		"a field dropped": {[]apiextensionsv1.CustomResourceDefinition{crd(version("v1alpha1", true, "replicas"))},
			[]string{"CRD widgets.example.com v1alpha1: field spec.image is gone"}},
		"the stored version dropped": {[]apiextensionsv1.CustomResourceDefinition{crd(version("v1beta1", true, "replicas", "image"))},
			[]string{"CRD widgets.example.com: version v1alpha1 (stored by the release) is gone"}},
		"the CRD dropped": {nil, []string{"CRD widgets.example.com is gone"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Dropped(released, Of(c.next))).To(Equal(c.want))
		})
	}
}

func TestOfListsNestedFields(t *testing.T) {
	s := Of([]apiextensionsv1.CustomResourceDefinition{crd(version("v1alpha1", true, "image"))})
	NewWithT(t).Expect(s["widgets.example.com"].Versions["v1alpha1"]).To(Equal(
		[]string{"spec", "spec.image", "spec.items", "spec.items[].address"}))
	NewWithT(t).Expect(s["widgets.example.com"].Stored).To(Equal([]string{"v1alpha1"}))
}
