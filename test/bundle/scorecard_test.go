package bundle

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// conditionsDescriptor is the x-descriptor the OpenShift console renders conditions with.
const conditionsDescriptor = "urn:alm:descriptor:io.kubernetes.conditions"

// TestOwnedCRDsAreDescribed holds the project's marker rules beyond the scorecard (which runs for real in
// TestRealScorecard): every owned CRD has a display name and a description; every top-level spec field of its
// schema has a specDescriptor, not only the fields the samples set; conditions have a status descriptor rendered as
// conditions.
func TestOwnedCRDsAreDescribed(t *testing.T) {
	owned := csv(t).Spec.CustomResourceDefinitions.Owned
	NewWithT(t).Expect(owned).NotTo(BeEmpty())
	for _, desc := range owned {
		t.Run(desc.Name+"/"+desc.Version, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(desc.DisplayName).NotTo(BeEmpty(), "no displayName (type-level +operator-sdk:csv marker)")
			g.Expect(desc.Description).NotTo(BeEmpty(), "no description (type doc comment)")
			var crdSchemaFound bool
			for _, crd := range theBundle(t).V1CRDs {
				if crd.Name != desc.Name {
					continue
				}
				s := schemaFor(crd, desc.Version)
				g.Expect(s).NotTo(BeNil())
				crdSchemaFound = true
				specPaths := map[string]bool{}
				for _, d := range desc.SpecDescriptors {
					g.Expect(d.DisplayName).NotTo(BeEmpty(), "specDescriptor %s has no displayName", d.Path)
					specPaths[d.Path] = true
				}
				for field := range s.Properties["spec"].Properties {
					g.Expect(specPaths).To(HaveKey(field), "spec.%s has no +operator-sdk:csv:customresourcedefinitions:type=spec marker", field)
				}
				if _, ok := s.Properties["status"].Properties["conditions"]; ok {
					g.Expect(desc.StatusDescriptors).To(ContainElement(And(
						HaveField("Path", "conditions"),
						HaveField("XDescriptors", ContainElement(conditionsDescriptor)),
					)), "status.conditions needs a type=status marker with xDescriptors={%q}", conditionsDescriptor)
				}
			}
			g.Expect(crdSchemaFound).To(BeTrue(), "owned CRD %s is not in the bundle", desc.Name)
		})
	}
}

// TestEveryCRDIsInTheBundle catches a CRD generated under config/crd/bases but left out of
// config/crd/kustomization.yaml (and so out of the bundle).
func TestEveryCRDIsInTheBundle(t *testing.T) {
	g := NewWithT(t)
	files, err := filepath.Glob(repoPath("config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	inBundle := map[string]bool{}
	for _, crd := range theBundle(t).V1CRDs {
		inBundle[crd.Name] = true
	}
	g.Expect(theBundle(t).V1beta1CRDs).To(BeEmpty())
	for _, f := range files {
		for _, obj := range documents(t, f) {
			g.Expect(inBundle).To(HaveKey(obj.GetName()), "%s is not in the bundle: list it in config/crd/kustomization.yaml", obj.GetName())
		}
	}
	g.Expect(inBundle).To(HaveLen(len(csv(t).Spec.CustomResourceDefinitions.Owned)))
}

// TestExamplesAreTheSamples checks that alm-examples hold exactly the objects of config/samples and cover every
// owned CRD.
func TestExamplesAreTheSamples(t *testing.T) {
	g := NewWithT(t)
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(repoPath("config", "samples", "kustomization.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, &kustomization)).To(Succeed())

	type key struct {
		gvk  schema.GroupVersionKind
		name string
	}
	samples := map[key]map[string]any{}
	for _, r := range kustomization.Resources {
		for _, obj := range documents(t, repoPath("config", "samples", r)) {
			g.Expect(obj.GetNamespace()).To(BeEmpty(), "%s: samples carry no namespace", r)
			samples[key{obj.GroupVersionKind(), obj.GetName()}] = obj.Object
		}
	}
	examples := map[key]map[string]any{}
	kinds := map[string]bool{}
	for _, ex := range almExamples(t) {
		examples[key{ex.GroupVersionKind(), ex.GetName()}] = ex.Object
		kinds[ex.GroupVersionKind().Group+"/"+ex.GetKind()] = true
	}
	g.Expect(examples).To(Equal(samples), "alm-examples differ from config/samples: run `make bundle`")
	for _, crd := range theBundle(t).V1CRDs {
		g.Expect(kinds).To(HaveKey(crd.Spec.Group+"/"+crd.Spec.Names.Kind),
			"no sample for %s: add config/samples/<group>_<version>_<kind>.yaml", crd.Name)
	}
}
