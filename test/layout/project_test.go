// Package layout checks that the project's records agree with its code: PROJECT with the CRDs and API packages,
// and the Dockerfiles with the conventions the bundle and the cluster rely on.
package layout

import (
	"os"
	"os/exec"
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

// TestDeployDoesNotBuildTheControlPlane: `make deploy` and friends need kubectl, not the local control plane the
// tests run (which takes many minutes to compile); `make -n` lists what they would build and run.
func TestDeployDoesNotBuildTheControlPlane(t *testing.T) {
	g := NewWithT(t)
	for _, target := range []string{"install", "uninstall", "deploy", "undeploy"} {
		cmd := exec.Command("make", "-n", target)
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		g.Expect(string(out)).NotTo(ContainSubstring("kube-apiserver"), "make %s builds the control plane", target)
		g.Expect(string(out)).NotTo(ContainSubstring("etcd"), "make %s builds etcd", target)
	}
}

// TestOneInstallNamespace: the plain install, OLM's suggested namespace and the Helm instructions name one
// namespace, so the Service addresses the docs give hold whichever way the operator was installed.
func TestOneInstallNamespace(t *testing.T) {
	g := NewWithT(t)
	root := testenv.RepoRoot()
	read := func(rel string) string {
		data, err := os.ReadFile(filepath.Join(root, rel))
		g.Expect(err).NotTo(HaveOccurred())
		return string(data)
	}
	m := regexp.MustCompile(`(?m)^namespace: (\S+)$`).FindStringSubmatch(read("config/default/kustomization.yaml"))
	g.Expect(m).NotTo(BeNil())
	ns := m[1]
	g.Expect(read("config/manifests/bases/quartet-operator.clusterserviceversion.yaml")).
		To(ContainSubstring("operatorframework.io/suggested-namespace: " + ns + "\n"))
	install := read("docs/install.md")
	g.Expect(install).To(MatchRegexp(`helm (upgrade --)?install quartet-operator \S+ (-n|--namespace) ` + regexp.QuoteMeta(ns) + `\b`))
	for _, doc := range []string{"docs/install.md", "docs/mcp-registry.md", "docs/targetsource.md", "README.md"} {
		for _, svc := range regexp.MustCompile(`quartet-operator-[a-z-]+\.([a-z0-9-]+)\.svc`).FindAllStringSubmatch(read(doc), -1) {
			g.Expect(svc[1]).To(Equal(ns), "%s: %s", doc, svc[0])
		}
	}
}
