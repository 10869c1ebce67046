// Package layout checks that the project's records agree with its code: PROJECT with the CRDs and API packages,
// and the Dockerfiles with the conventions the bundle and the cluster rely on.
package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

type projectFile struct {
	Layout     []string          `json:"layout"`
	Multigroup bool              `json:"multigroup"`
	Plugins    map[string]any    `json:"plugins"`
	Repo       string            `json:"repo"`
	Resources  []projectResource `json:"resources"`
}

type projectResource struct {
	Domain  string `json:"domain"`
	Group   string `json:"group"`
	Kind    string `json:"kind"`
	Version string `json:"version"`
	Path    string `json:"path"`
	API     struct {
		Namespaced bool `json:"namespaced"`
	} `json:"api"`
	External bool `json:"external"`
}

func readProject(t *testing.T) projectFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "PROJECT"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var p projectFile
	NewWithT(t).Expect(yaml.Unmarshal(data, &p)).To(Succeed())
	return p
}

func readCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	crds := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(yaml.Unmarshal(data, crd)).To(Succeed())
		g.Expect(filepath.Base(f)).To(Equal(crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml"), "CRD file name convention")
		crds[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = crd
	}
	return crds
}

func TestProjectRecordsEveryKind(t *testing.T) {
	g := NewWithT(t)
	p := readProject(t)
	g.Expect(p.Layout).To(Equal([]string{"go.kubebuilder.io/v4"}))
	g.Expect(p.Multigroup).To(BeTrue())
	g.Expect(p.Plugins).To(HaveKey("manifests.sdk.operatorframework.io/v2"))
	g.Expect(p.Plugins).To(HaveKey("scorecard.sdk.operatorframework.io/v2"))
	g.Expect(p.Repo).To(Equal("github.com/quartet-dev/quartet-operator"))

	crds := readCRDs(t)
	seen := map[string]bool{}
	for _, r := range p.Resources {
		if r.External {
			continue
		}
		key := r.Group + "." + r.Domain + "/" + r.Kind
		seen[key] = true
		crd, ok := crds[key]
		g.Expect(ok).To(BeTrue(), "PROJECT lists %s but config/crd/bases has no CRD for it", key)
		wantScope := apiextensionsv1.ClusterScoped
		if r.API.Namespaced {
			wantScope = apiextensionsv1.NamespaceScoped
		}
		g.Expect(crd.Spec.Scope).To(Equal(wantScope), "%s scope", key)
		g.Expect(crd.Spec.Versions).To(ContainElement(HaveField("Name", r.Version)))
		rel := strings.TrimPrefix(r.Path, p.Repo+"/")
		g.Expect(rel).To(HavePrefix("apis/"), "%s path must be under apis/", key)
		g.Expect(filepath.Join(testenv.RepoRoot(), rel, "groupversion_info.go")).To(BeARegularFile())
	}
	for key := range crds {
		g.Expect(seen).To(HaveKey(key), "CRD %s has no resource in PROJECT", key)
	}
}

// TestUninstallNamesExactlyOurCRDs: the uninstall recipe in docs/install.md deletes CRDs (and every object of
// them) by an explicit list, which must be exactly the CRDs config/crd ships: a pattern such as 'grafana.com'
// also matched other operators' CRDs (Loki's, Tempo's), and a missing name leaves a CRD behind.
func TestUninstallNamesExactlyOurCRDs(t *testing.T) {
	g := NewWithT(t)
	root := testenv.RepoRoot()
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var shipped []string
	for _, f := range files {
		group, plural, ok := strings.Cut(strings.TrimSuffix(filepath.Base(f), ".yaml"), "_")
		g.Expect(ok).To(BeTrue(), f)
		shipped = append(shipped, plural+"."+group)
	}
	g.Expect(shipped).NotTo(BeEmpty())

	doc, err := os.ReadFile(filepath.Join(root, "docs", "install.md"))
	g.Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?s)QUARTET_CRDS="(.*?)"`).FindSubmatch(doc)
	g.Expect(m).NotTo(BeNil(), "docs/install.md defines QUARTET_CRDS")
	listed := strings.Fields(strings.ReplaceAll(string(m[1]), "\\", " "))
	g.Expect(listed).To(ConsistOf(shipped))
	g.Expect(string(doc)).NotTo(MatchRegexp(`grep -E '[^']*grafana\.com`), "no CRD deletion by pattern")
}
