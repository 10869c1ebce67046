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
	chartv2util "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

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

// Limits bound what the renderer accepts (the same limits the source handler ships under).
type Limits = pipeline.Limits

// DefaultLimits are 64 MiB and 10,000 files.
var DefaultLimits = pipeline.DefaultLimits

// Input is what a render needs besides the files.
type Input struct {
	// ReleaseName and Namespace are the Helm release name and namespace (the source target's name and namespace).
	ReleaseName, Namespace string
	// Overrides are Helm values (YAML) from the source target's overrides.
	Overrides []byte
	// Path is the source target's directory relative to the root of the files ("" is the root). Kustomize
	// builds there with every file available (an overlay's ../base); Helm and plain YAML see only that directory.
	Path string
	// HelmHooks is the source target's hook policy (HooksRefuse when empty, or HooksSkip).
	HelmHooks string
	// MaxOutputBytes bounds the rendered YAML (0: no bound); more fails with ErrOutputTooLarge.
	MaxOutputBytes int
}

// ErrOutputTooLarge means the rendered YAML is over Input.MaxOutputBytes.
var ErrOutputTooLarge = errors.New("rendered output over the render output limit")

// Helm hook policies (the source target's data.helm-hooks).
const (
	// HooksRefuse fails the render of a chart with install or upgrade hooks, naming them.
	HooksRefuse = "refuse"
	// HooksSkip renders the chart without its hooks and reports each one skipped.
	HooksSkip = "skip"
)

// DataHelmHooks is the source-target data key of the hook policy.
const DataHelmHooks = "helm-hooks"

// installEvents are the hook events an install or upgrade runs: a chart that needs them (a migration Job, a Job
// that makes its webhook certificate) does not work without them.
var installEvents = map[string]bool{"pre-install": true, "post-install": true, "pre-upgrade": true,
	"post-upgrade": true}

// Hook is a Helm hook the renderer skipped.
type Hook struct {
	Kind, Name, Path string
	// Events are the hook's events (pre-install, post-upgrade, …).
	Events []string
}

// String names the hook as warnings show it: Job/migrate (pre-install,pre-upgrade).
func (h Hook) String() string {
	return fmt.Sprintf("%s/%s (%s)", h.Kind, h.Name, strings.Join(h.Events, ","))
}

// Output is what a render produced.
type Output struct {
	Objects []*unstructured.Unstructured
	Type    Type
	// SkippedHooks are the chart's Helm hooks, which are not applied.
	SkippedHooks []Hook
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
			return nil, fmt.Errorf("the files shipped have more than %d files (the render limit is %s)", lim.MaxFiles, lim)
		}
		total += h.Size
		if total > lim.MaxBytes {
			return nil, fmt.Errorf("the files shipped are larger than %d bytes (the render limit is %s)", lim.MaxBytes, lim)
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

// Render renders a file set into objects (see RenderAll).
func Render(files map[string][]byte, in Input) ([]*unstructured.Unstructured, Type, error) {
	out, err := RenderAll(files, in)
	return out.Objects, out.Type, err
}

// RenderAll renders the source target at in.Path of a file set. The renderer is chosen by the files in that
// directory.
func RenderAll(files map[string][]byte, in Input) (Output, error) {
	dir := strings.Trim(path.Clean("/"+in.Path), "/")
	sub := under(files, dir)
	res := Output{Type: Detect(sub)}
	var out []byte
	var err error
	switch res.Type {
	case Helm:
		out, res.SkippedHooks, err = renderHelm(sub, in)
	case Kustomize:
		out, err = renderKustomize(files, dir)
	default:
		out = renderPlain(sub)
	}
	if err != nil {
		return res, err
	}
	if in.MaxOutputBytes > 0 && len(out) > in.MaxOutputBytes {
		return res, fmt.Errorf("%w: %s output is %d bytes, over the render output limit of %d bytes", ErrOutputTooLarge,
			res.Type, len(out), in.MaxOutputBytes)
	}
	if res.Objects, err = pipeline.SplitYAML(out); err != nil {
		return res, fmt.Errorf("%s output: %w", res.Type, err)
	}
	return res, nil
}

// under returns the files below dir, with paths relative to it.
func under(files map[string][]byte, dir string) map[string][]byte {
	if dir == "" {
		return files
	}
	out := map[string][]byte{}
	for n, b := range files {
		if rest, ok := strings.CutPrefix(n, dir+"/"); ok {
			out[rest] = b
		}
	}
	return out
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

// renderHelm renders a chart as Helm's install action does (dependencies processed) without running hooks: a
// GitOps apply has no install or upgrade lifecycle to run them in, applying them as ordinary objects would not run
// a pre-install Job before the rest (the orderer orders by kind) and would run it again with every change of its
// template, while a Job's template cannot be changed in place. So a chart with install or upgrade hooks is refused,
// naming them, unless its source target says to skip them (HooksSkip); hooks that only tests, deletions or
// rollbacks run are never applied and are reported as skipped.
func renderHelm(files map[string][]byte, in Input) ([]byte, []Hook, error) {
	var bf []*archive.BufferedFile
	for _, n := range sortedNames(files) {
		bf = append(bf, &archive.BufferedFile{Name: n, Data: files[n]})
	}
	ch, err := chartloader.LoadFiles(bf)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the chart: %w", err)
	}
	switch in.HelmHooks {
	case "", HooksRefuse, HooksSkip:
	default:
		return nil, nil, fmt.Errorf("data.%s: Unsupported value: %q: supported values: %q, %q", DataHelmHooks,
			in.HelmHooks, HooksRefuse, HooksSkip)
	}
	vals, err := common.ReadValues(in.Overrides)
	if err != nil {
		return nil, nil, fmt.Errorf("overrides are not valid Helm values: %w", err)
	}
	// As Helm's install action does: drop the subcharts a condition or tag disables (postgresql.enabled: false)
	// and copy the import-values of the enabled ones into the parent's values.
	if err := chartv2util.ProcessDependencies(ch, vals); err != nil {
		return nil, nil, fmt.Errorf("chart dependencies: %w", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, common.ReleaseOptions{
		Name: in.ReleaseName, Namespace: in.Namespace, Revision: 1, IsInstall: true}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("chart values: %w", err)
	}
	rendered, err := engine.Render(ch, rv)
	if err != nil {
		return nil, nil, fmt.Errorf("rendering the chart: %w", err)
	}
	for n := range rendered {
		if strings.HasSuffix(n, "NOTES.txt") {
			delete(rendered, n)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(rendered, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, nil, fmt.Errorf("splitting the chart output: %w", err)
	}
	skipped := make([]Hook, 0, len(hooks))
	var needed []string
	for _, h := range hooks {
		ev := make([]string, 0, len(h.Events))
		install := false
		for _, e := range h.Events {
			ev = append(ev, string(e))
			install = install || installEvents[string(e)]
		}
		hk := Hook{Kind: h.Kind, Name: h.Name, Path: h.Path, Events: ev}
		skipped = append(skipped, hk)
		if install {
			needed = append(needed, hk.String()+" in "+hk.Path)
		}
	}
	if len(needed) > 0 && in.HelmHooks != HooksSkip {
		return nil, nil, fmt.Errorf("the chart has Helm hooks an install or upgrade runs, which a GitOps apply cannot "+
			"run in their place: %s; set the source target's data.%s to %q to deploy the chart without them",
			strings.Join(needed, "; "), DataHelmHooks, HooksSkip)
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
	return b.Bytes(), skipped, nil
}

// checkKustomizations refuses what would make kustomize fetch or run a program: remote resources (kustomize
// would run git) and helmCharts (the helm binary). Only the kustomizations the build at dir reaches are checked, so
// an unrelated directory of the shipped subtree does not fail the target.
func checkKustomizations(files map[string][]byte, dir string) error {
	_, _, err := pipeline.WalkKustomizations(pipeline.MapTree(files), dir, func(file string, k pipeline.Kustomization) error {
		if len(k.HelmCharts) > 0 {
			return fmt.Errorf("%s: helmCharts is not supported (it runs the helm binary)", file)
		}
		for _, r := range k.References() {
			if pipeline.Remote(r) {
				return fmt.Errorf("%s: remote resource %q is not supported; vendor it into the repository", file, r)
			}
		}
		return nil
	})
	return err
}

// renderKustomize builds the kustomization at dir with every file shipped in an in-memory filesystem, so an overlay
// reaches its ../base. Load restrictions stay root-only: files a kustomization loads (patches, generator sources)
// must lie under its own directory, and only other kustomizations are reached across directories.
func renderKustomize(files map[string][]byte, dir string) ([]byte, error) {
	if err := checkKustomizations(files, dir); err != nil {
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
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, path.Join("/src", dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	return res.AsYaml()
}
