package bundle

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/crdcompat"
)

// The catalog's source, rendered into catalog/ by `make bundle` (hack/bundle.sh).
const templatePath = "config/catalog/template.yaml"

// builtTool finds a binary `make` links into bin/ (make test builds them); missing fails, never skips.
func builtTool(t *testing.T, name string) string {
	t.Helper()
	p := repoPath("bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not built: run `make bundle` (make test does): %v", p, err)
	}
	return p
}

// catalogRender runs catalogrender, returning its output, or its error with what it printed.
func catalogRender(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(builtTool(t, "catalogrender"), append([]string{"--migrate-level=bundle-object-to-csv-metadata"}, args...)...)
	cmd.Dir = repoPath()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// template reads config/catalog/template.yaml.
func template(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(repoPath(templatePath))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	tmpl := map[string]any{}
	NewWithT(t).Expect(yaml.Unmarshal(data, &tmpl)).To(Succeed())
	return tmpl
}

// TestCatalogTemplateDescribesThePackage: the template is an opm basic template whose package entry carries the
// CSV's icon (docs/images/quartet-icon.svg) and whose channels list this bundle.
func TestCatalogTemplateDescribesThePackage(t *testing.T) {
	g := NewWithT(t)
	tmpl := template(t)
	g.Expect(tmpl["schema"]).To(Equal("olm.template.basic"))
	svg, err := os.ReadFile(repoPath("docs", "images", "quartet-icon.svg"))
	g.Expect(err).NotTo(HaveOccurred())
	var sawPackage, sawSelf bool
	for _, e := range tmpl["entries"].([]any) {
		entry := e.(map[string]any)
		switch entry["schema"] {
		case "olm.package":
			sawPackage = true
			icon := entry["icon"].(map[string]any)
			g.Expect(icon["base64data"]).To(Equal(base64.StdEncoding.EncodeToString(svg)), "the package icon is the svg")
			g.Expect(icon["base64data"]).To(Equal(csv(t).Spec.Icon[0].Data), "the package icon is the CSV's")
		case "olm.bundle":
			g.Expect(entry).To(HaveLen(2), "a basic template's bundle entry holds only schema and image")
			sawSelf = sawSelf || entry["image"] == "ghcr.io/quartet-dev/quartet-operator-bundle:v"+csv(t).Spec.Version.String()
		}
	}
	g.Expect(sawPackage).To(BeTrue())
	g.Expect(sawSelf).To(BeTrue(), "the template lists the bundle of this version")
}

// TestReleaseThroughTheTemplate walks the documented release procedure with the real renderer: freeze this
// version, make a next bundle, add it to the template, render, and check the catalog opm validates — every release
// kept byte for byte as frozen, the new entry replacing it and skipping from it — and that the renderer refuses a
// template that drops a release or names an image it cannot read.
func TestReleaseThroughTheTemplate(t *testing.T) {
	g := NewWithT(t)
	version := csv(t).Spec.Version.String()
	const next = "99.0.0"
	image := func(v string) string { return "ghcr.io/quartet-dev/quartet-operator-bundle:v" + v }
	tmp := t.TempDir()

	// 1. make release-freeze: this bundle, rendered as the catalog holds it.
	releases := filepath.Join(tmp, "releases")
	g.Expect(os.Mkdir(releases, 0o755)).To(Succeed())
	frozen, err := catalogRender(t, "--bundle-only", "--bundle-image="+image(version))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(releases, version+".yaml"), frozen, 0o644)).To(Succeed())
	g.Expect(catalogBundle(t, repoPath("catalog", packageName, "index.yaml"), packageName+".v"+version)).
		To(Equal(catalogBundle(t, filepath.Join(releases, version+".yaml"), packageName+".v"+version)),
			"the frozen release is the bundle the catalog publishes")

	// 2. The next version's bundle image: bundle.Dockerfile and bundle/ with the CSV re-versioned.
	nextCtx := filepath.Join(tmp, "next")
	g.Expect(os.CopyFS(filepath.Join(nextCtx, "bundle"), os.DirFS(repoPath("bundle")))).To(Succeed())
	dockerfile, err := os.ReadFile(repoPath("bundle.Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(nextCtx, "bundle.Dockerfile"), dockerfile, 0o644)).To(Succeed())
	csvPath := filepath.Join(nextCtx, "bundle", "manifests", packageName+".clusterserviceversion.yaml")
	reversion(t, csvPath, next)

	// The CRD guard of the release (TestCRDsKeepWhatReleasesPromised) on these two real bundles: the copy keeps
	// every field; one field removed from the next bundle is named.
	released, err := crdcompat.ReadDir(repoPath("bundle", "manifests"))
	g.Expect(err).NotTo(HaveOccurred())
	nextCRDs, err := crdcompat.ReadDir(filepath.Join(nextCtx, "bundle", "manifests"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crdcompat.Dropped(crdcompat.Of(released), crdcompat.Of(nextCRDs))).To(BeEmpty())
	crd := &nextCRDs[0]
	delete(crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties, "spec")
	g.Expect(crdcompat.Dropped(crdcompat.Of(released), crdcompat.Of(nextCRDs))).To(ContainElement(
		fmt.Sprintf("CRD %s %s: field spec is gone", crd.Name, crd.Spec.Versions[0].Name)))

	// 3. The template with the next release added as docs/install.md says.
	tmpl := template(t)
	entries := tmpl["entries"].([]any)
	for _, e := range entries {
		if entry := e.(map[string]any); entry["schema"] == "olm.channel" {
			entry["entries"] = append(entry["entries"].([]any), map[string]any{
				"name": packageName + ".v" + next, "replaces": packageName + ".v" + version,
				"skipRange": ">=" + version + " <" + next,
			})
		}
	}
	withNext := append(append([]any{}, entries...), map[string]any{"schema": "olm.bundle", "image": image(next)})
	nextTemplate := writeTemplate(t, tmp, "next.yaml", tmpl, withNext)
	renderNext := func(templateFile string) ([]byte, error) {
		return catalogRender(t, "--template="+templateFile, "--frozen="+releases, "--bundle-image="+image(next),
			"--bundle-context="+nextCtx, "--bundle-dockerfile="+filepath.Join(nextCtx, "bundle.Dockerfile"))
	}

	// 4. Render and validate.
	out, err := renderNext(nextTemplate)
	g.Expect(err).NotTo(HaveOccurred())
	catalogDir := filepath.Join(tmp, "catalog")
	g.Expect(os.MkdirAll(filepath.Join(catalogDir, packageName), 0o755)).To(Succeed())
	index := filepath.Join(catalogDir, packageName, "index.yaml")
	g.Expect(os.WriteFile(index, out, 0o644)).To(Succeed())
	validate, err := exec.Command(builtTool(t, "opm"), "validate", catalogDir).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "opm validate: %s", validate)
	g.Expect(catalogBundle(t, index, packageName+".v"+version)).
		To(Equal(catalogBundle(t, filepath.Join(releases, version+".yaml"), packageName+".v"+version)), "the release as frozen")
	nextBundle := catalogBundle(t, index, packageName+".v"+next)
	g.Expect(nextBundle["image"]).To(Equal(image(next)))
	g.Expect(nextBundle["properties"]).To(ContainElement(And(HaveKeyWithValue("type", "olm.package"),
		HaveKeyWithValue("value", HaveKeyWithValue("version", next)))))
	for _, doc := range documents(t, index) {
		if doc.Object["schema"] == "olm.channel" {
			g.Expect(doc.Object["entries"]).To(ContainElement(And(
				HaveKeyWithValue("name", packageName+".v"+next),
				HaveKeyWithValue("replaces", packageName+".v"+version),
				HaveKeyWithValue("skipRange", ">="+version+" <"+next))))
		}
	}

	// 5. What the renderer refuses, naming the image.
	var withoutRelease []any
	for _, e := range withNext {
		if entry := e.(map[string]any); entry["schema"] != "olm.bundle" || entry["image"] != image(version) {
			withoutRelease = append(withoutRelease, e)
		}
	}
	refused := map[string]struct {
		entries []any
		want    string
	}{
		"a release dropped from the template": {withoutRelease, "lists no olm.bundle for " + image(version)},
		"an image neither built nor frozen": {
			append(append([]any{}, withNext...), map[string]any{"schema": "olm.bundle", "image": image("98.0.0")}),
			"bundle image " + image("98.0.0") + " is neither the bundle being built",
		},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := renderNext(writeTemplate(t, tmp, strings.ReplaceAll(name, " ", "-")+".yaml", tmpl, tc.entries))
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
	t.Run("rebuilding a released version", func(t *testing.T) {
		_, err := catalogRender(t, "--template="+templatePath, "--frozen="+releases, "--bundle-image="+image(version))
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("was already released")))
	})
}

// writeTemplate writes tmpl with entries into dir/name and returns its path.
func writeTemplate(t *testing.T, dir, name string, tmpl map[string]any, entries []any) string {
	t.Helper()
	data, err := yaml.Marshal(map[string]any{"schema": tmpl["schema"], "entries": entries})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	path := filepath.Join(dir, name)
	NewWithT(t).Expect(os.WriteFile(path, data, 0o644)).To(Succeed())
	return path
}

// catalogBundle returns the olm.bundle document called name in a catalog file.
func catalogBundle(t *testing.T, path, name string) map[string]any {
	t.Helper()
	for _, doc := range documents(t, path) {
		if doc.Object["schema"] == "olm.bundle" && doc.Object["name"] == name {
			return doc.Object
		}
	}
	t.Fatalf("%s has no olm.bundle %s", path, name)
	return nil
}

// reversion renames the CSV at path for version.
func reversion(t *testing.T, path, version string) {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(path)
	g.Expect(err).NotTo(HaveOccurred())
	obj := map[string]any{}
	g.Expect(yaml.Unmarshal(data, &obj)).To(Succeed())
	u := &unstructured.Unstructured{Object: obj}
	u.SetName(packageName + ".v" + version)
	g.Expect(unstructured.SetNestedField(obj, version, "spec", "version")).To(Succeed())
	data, err = yaml.Marshal(obj)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(path, data, 0o644)).To(Succeed())
}
