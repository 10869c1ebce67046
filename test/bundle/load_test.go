// Package bundle checks the generated OLM bundle (bundle/), its image metadata and the file-based catalog
// (catalog/) offline: the operator-framework validators `operator-sdk bundle validate --select-optional
// suite=operatorframework` runs, the checks of the scorecard basic and olm suites, and the security and
// consistency rules the project adds (webhooks, RBAC, Pod Security, samples). Every check iterates over whatever
// the bundle holds, so it stays true as kinds are added; regenerate the bundle with `make bundle`.
package bundle

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// repoPath joins elements onto the repository root.
func repoPath(elem ...string) string {
	return filepath.Join(append([]string{testenv.RepoRoot()}, elem...)...)
}

var loadBundle = sync.OnceValues(func() (*manifests.Bundle, error) {
	return manifests.GetBundleFromDir(repoPath("bundle"))
})

// theBundle loads bundle/ once per test binary.
func theBundle(t *testing.T) *manifests.Bundle {
	t.Helper()
	b, err := loadBundle()
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "load bundle/ (run `make bundle`)")
	NewWithT(t).Expect(b.CSV).NotTo(BeNil(), "bundle/ has no ClusterServiceVersion")
	return b
}

// csv returns the bundle's ClusterServiceVersion.
func csv(t *testing.T) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	return theBundle(t).CSV
}

// documents splits a multi-document YAML file into objects, skipping empty documents.
func documents(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := map[string]any{}
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		NewWithT(t).Expect(err).NotTo(HaveOccurred(), "decode %s", path)
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// almExamples parses the CSV's alm-examples annotation.
func almExamples(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	raw := csv(t).Annotations["alm-examples"]
	NewWithT(t).Expect(raw).NotTo(BeEmpty(), "CSV has no alm-examples")
	var objs []map[string]any
	NewWithT(t).Expect(yaml.Unmarshal([]byte(raw), &objs)).To(Succeed(), "alm-examples is not a JSON array")
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		out = append(out, &unstructured.Unstructured{Object: o})
	}
	return out
}

// schemaFor returns the openAPIV3Schema of a CRD version.
func schemaFor(crd *apiextensionsv1.CustomResourceDefinition, version string) *apiextensionsv1.JSONSchemaProps {
	for _, v := range crd.Spec.Versions {
		if v.Name == version && v.Schema != nil {
			return v.Schema.OpenAPIV3Schema
		}
	}
	return nil
}
