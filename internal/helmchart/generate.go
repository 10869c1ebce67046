// Package helmchart generates charts/quartet-operator from the kustomize sources config/default deploys (through
// config/helm), so the chart is never a second, hand-kept copy of the manifests: `make helm-chart` writes it and
// `make verify` fails when the committed chart differs from what the sources give.
package helmchart

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Where the chart's inputs are, relative to the repository root.
const (
	KustomizeDir = "config/helm"
	SourceDir    = "config/helm/chart"
	ChartDir     = "charts/quartet-operator"
)

// Options of one generation.
type Options struct {
	// Root is the repository root.
	Root string
	// Version is the chart's version and appVersion (the Makefile's VERSION).
	Version string
	// Out is where the chart is written; empty means ChartDir under Root.
	Out string
}

// Generate rewrites ChartDir under opts.Root.
func Generate(opts Options) error {
	objects, err := Build(opts.Root)
	if err != nil {
		return err
	}
	values, err := readValues(filepath.Join(opts.Root, SourceDir, "values.yaml"))
	if err != nil {
		return err
	}
	out := opts.Out
	if out == "" {
		out = filepath.Join(opts.Root, ChartDir)
	}
	// Start empty, so an object that left config/ leaves the chart too.
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	if err := copySources(filepath.Join(opts.Root, SourceDir), out, opts.Version); err != nil {
		return err
	}
	webhooks, err := findWebhookNames(objects)
	if err != nil {
		return err
	}
	var owned []string
	for _, obj := range objects {
		switch obj["kind"] {
		case "Namespace":
			// The release namespace: `helm install --namespace … --create-namespace`.
			continue
		case "CustomResourceDefinition":
			raw, err := yaml.Marshal(obj)
			if err != nil {
				return err
			}
			if err := writeFile(filepath.Join(out, "crds", crdFileName(obj)), raw); err != nil {
				return err
			}
			continue
		case "Deployment":
			owned = chartOwnedFlags(obj)
			if err := checkDefaults(obj, values, opts.Version); err != nil {
				return err
			}
		}
		t, err := templatize(obj, webhooks)
		if err != nil {
			return err
		}
		text, err := t.Render()
		if err != nil {
			return fmt.Errorf("%s: %w", name(obj), err)
		}
		if err := writeFile(filepath.Join(out, "templates", fileName(obj)), []byte(text)); err != nil {
			return err
		}
	}
	if owned == nil {
		return fmt.Errorf("%s builds no Deployment", KustomizeDir)
	}
	schema, err := Schema(values, owned)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(out, "values.schema.json"), schema)
}

// Build runs kustomize on KustomizeDir and returns its objects.
func Build(root string) ([]map[string]any, error) {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(root, KustomizeDir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", KustomizeDir, err)
	}
	var objects []map[string]any
	for _, r := range resources.Resources() {
		obj, err := r.Map()
		if err != nil {
			return nil, err
		}
		objects = append(objects, obj)
	}
	return objects, nil
}

func readValues(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

var chartVersionLine = regexp.MustCompile(`(?m)^(version: |appVersion: ")[^"\n]*`)

// copySources copies the hand-written chart files, setting the chart's version and appVersion.
func copySources(from, to, version string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if rel == "Chart.yaml" {
			if n := len(chartVersionLine.FindAll(raw, -1)); n != 2 {
				return fmt.Errorf("%s: expected a version and an appVersion line, found %d", path, n)
			}
			raw = chartVersionLine.ReplaceAll(raw, []byte("${1}"+version))
		}
		return writeFile(filepath.Join(to, rel), raw)
	})
}

// checkDefaults fails when a default in values.yaml differs from what config/ deploys: the chart's default
// install must be config/default's.
func checkDefaults(deployment, values map[string]any, version string) error {
	pod := dig(deployment, "spec", "template", "spec").(map[string]any)
	container := pod["containers"].([]any)[0].(map[string]any)
	image := dig(values, "image", "repository").(string) + ":v" + version
	args := fmt.Sprint(container["args"])
	checks := []struct {
		value       string
		want, given any
	}{
		{"replicaCount", dig(deployment, "spec", "replicas"), dig(values, "replicaCount")},
		{"resources", container["resources"], dig(values, "resources")},
		{"podSecurityContext", pod["securityContext"], dig(values, "podSecurityContext")},
		{"securityContext", container["securityContext"], dig(values, "securityContext")},
		{"image (repository and v<appVersion>)", container["image"], image},
		{"leaderElection.enabled", strings.Contains(args, "--leader-elect"), dig(values, "leaderElection", "enabled")},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(normalize(c.want), normalize(c.given)) {
			return fmt.Errorf("%s/values.yaml: the default of %s is %v, but config/ deploys %v", SourceDir, c.value, c.given, c.want)
		}
	}
	return nil
}

// normalize makes numbers comparable whichever decoder read them.
func normalize(v any) any {
	raw, _ := yaml.Marshal(v)
	var out any
	_ = yaml.Unmarshal(raw, &out)
	return out
}

func dig(m map[string]any, path ...string) any {
	var v any = m
	for _, key := range path {
		sub, _ := v.(map[string]any)
		v = sub[key]
	}
	return v
}

// crdFileName is controller-gen's name for a CRD file: <group>_<plural>.yaml.
func crdFileName(obj map[string]any) string {
	plural, group, _ := strings.Cut(dig(obj, "metadata", "name").(string), ".")
	return group + "_" + plural + ".yaml"
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
