// Package renderer turns a tar of a source target's subtree into manifests with the Helm SDK, Kustomize (krusty
// on an in-memory filesystem) or as plain YAML, and serves that as the RendererService stage. It never runs a
// shell or any other program.
package renderer

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chartloader "helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// Type is the renderer a subtree needs.
type Type string

// Renderer types, chosen by the first match: Chart.yaml, a kustomization file, otherwise plain YAML.
const (
	Helm      Type = "HELM"
	Kustomize Type = "KUSTOMIZE"
	Plain     Type = "PLAIN"
)

// Limits bound what the renderer accepts.
type Limits struct {
	// MaxBytes is the largest total size of regular files in the tar.
	MaxBytes int64
	// MaxFiles is the largest number of regular files in the tar.
	MaxFiles int
}

// DefaultLimits are 64 MiB and 10,000 files.
var DefaultLimits = Limits{MaxBytes: 64 << 20, MaxFiles: 10000}

// Input is what a render needs besides the files.
type Input struct {
	// ReleaseName and Namespace are the Helm release name and namespace (the source target's name and namespace).
	ReleaseName, Namespace string
	// Overrides are Helm values (YAML) from the source target's overrides.
	Overrides []byte
}

// Untar reads a tar into memory, refusing links, absolute or escaping paths and anything over the limits.
func Untar(r io.Reader, lim Limits) (map[string][]byte, error) {
	files := map[string][]byte{}
	var total int64
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the tar: %w", err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, fmt.Errorf("tar entry %q: only regular files and directories are accepted", h.Name)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("tar entry %q escapes the source target path", h.Name)
		}
		if len(files) >= lim.MaxFiles {
			return nil, fmt.Errorf("the source target has more than %d files", lim.MaxFiles)
		}
		total += h.Size
		if total > lim.MaxBytes {
			return nil, fmt.Errorf("the source target is larger than %d bytes", lim.MaxBytes)
		}
		b, err := io.ReadAll(io.LimitReader(tr, h.Size+1))
		if err != nil {
			return nil, fmt.Errorf("reading %q: %w", h.Name, err)
		}
		files[name] = b
	}
}

// Detect picks the renderer for a file set.
func Detect(files map[string][]byte) Type {
	if _, ok := files["Chart.yaml"]; ok {
		return Helm
	}
	for _, k := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if _, ok := files[k]; ok {
			return Kustomize
		}
	}
	return Plain
}

// Render renders a file set into objects.
func Render(files map[string][]byte, in Input) ([]*unstructured.Unstructured, Type, error) {
	t := Detect(files)
	var out []byte
	var err error
	switch t {
	case Helm:
		out, err = renderHelm(files, in)
	case Kustomize:
		out, err = renderKustomize(files)
	default:
		out = renderPlain(files)
	}
	if err != nil {
		return nil, t, err
	}
	objs, err := pipeline.SplitYAML(out)
	if err != nil {
		return nil, t, fmt.Errorf("%s output: %w", t, err)
	}
	return objs, t, nil
}

func sortedNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func renderPlain(files map[string][]byte) []byte {
	var b bytes.Buffer
	for _, n := range sortedNames(files) {
		if ext := path.Ext(n); ext != ".yaml" && ext != ".yml" {
			continue
		}
		b.WriteString("\n---\n")
		b.Write(files[n])
	}
	return b.Bytes()
}

func renderHelm(files map[string][]byte, in Input) ([]byte, error) {
	var bf []*archive.BufferedFile
	for _, n := range sortedNames(files) {
		bf = append(bf, &archive.BufferedFile{Name: n, Data: files[n]})
	}
	ch, err := chartloader.LoadFiles(bf)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	vals, err := common.ReadValues(in.Overrides)
	if err != nil {
		return nil, fmt.Errorf("overrides are not valid Helm values: %w", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, common.ReleaseOptions{
		Name: in.ReleaseName, Namespace: in.Namespace, Revision: 1, IsInstall: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("chart values: %w", err)
	}
	rendered, err := engine.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	for n := range rendered {
		if strings.HasSuffix(n, "NOTES.txt") {
			delete(rendered, n)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(rendered, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("splitting the chart output: %w", err)
	}
	if len(hooks) > 0 {
		return nil, fmt.Errorf("the chart has Helm hooks (%s %s in %s): hooks are not supported, since a GitOps "+
			"pipeline applies a desired state and has no install/upgrade lifecycle to run them in",
			hooks[0].Kind, hooks[0].Name, hooks[0].Path)
	}
	var b bytes.Buffer
	for _, crd := range ch.CRDObjects() {
		b.WriteString("\n---\n")
		b.Write(crd.File.Data)
	}
	for _, m := range manifests {
		b.WriteString("\n---\n")
		b.WriteString(m.Content)
	}
	return b.Bytes(), nil
}

// remote reports kustomization entries that would make kustomize fetch (and run git) at render time.
func remote(s string) bool {
	return strings.Contains(s, "://") || strings.HasPrefix(s, "git@") || strings.HasPrefix(s, "github.com/") ||
		strings.Contains(s, "?ref=")
}

func checkKustomizations(files map[string][]byte) error {
	for n, b := range files {
		switch path.Base(n) {
		case "kustomization.yaml", "kustomization.yml", "Kustomization":
		default:
			continue
		}
		var k struct {
			Resources  []string `json:"resources"`
			Bases      []string `json:"bases"`
			Components []string `json:"components"`
			HelmCharts []any    `json:"helmCharts"`
		}
		if err := yaml.Unmarshal(b, &k); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		if len(k.HelmCharts) > 0 {
			return fmt.Errorf("%s: helmCharts is not supported (it runs the helm binary)", n)
		}
		for _, r := range append(append(k.Resources, k.Bases...), k.Components...) {
			if remote(r) {
				return fmt.Errorf("%s: remote resource %q is not supported; vendor it into the repository", n, r)
			}
		}
	}
	return nil
}

func renderKustomize(files map[string][]byte) ([]byte, error) {
	if err := checkKustomizations(files); err != nil {
		return nil, err
	}
	fs := filesys.MakeFsInMemory()
	for n, b := range files {
		p := "/src/" + n
		if err := fs.MkdirAll(path.Dir(p)); err != nil {
			return nil, err
		}
		if err := fs.WriteFile(p, b); err != nil {
			return nil, err
		}
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/src")
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	return res.AsYaml()
}
