package helmchart

import (
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TemplateOptions say what a chart is rendered as and for.
type TemplateOptions struct {
	ReleaseName, Namespace string
	// KubeVersion is the cluster's version, e.g. v1.37.2.
	KubeVersion string
	// APIVersions are the group versions the cluster serves beside Kubernetes' own (cert-manager.io/v1, ...).
	APIVersions []string
}

// Template renders the chart in dir for values as `helm template` does: its templates (not its crds/), as objects
// in Helm's install order. The chart tests and the real-node traffic tests share it, so a test applies what the
// chart renders rather than a copy of it.
func Template(dir string, opts TemplateOptions, values map[string]any) ([]*unstructured.Unstructured, error) {
	chart, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", dir, err)
	}
	install := action.NewInstall(action.NewConfiguration())
	install.APIVersions = opts.APIVersions
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName = opts.ReleaseName
	install.Namespace = opts.Namespace
	install.Replace = true
	kubeVersion, err := common.ParseKubeVersion(opts.KubeVersion)
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kubeVersion
	r, err := install.Run(chart, values)
	if err != nil {
		return nil, err
	}
	return SplitManifest(r.(*releasev1.Release).Manifest)
}

// SplitManifest parses a release manifest into objects, in Helm's install order; empty documents are dropped.
func SplitManifest(manifest string) ([]*unstructured.Unstructured, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var objects []*unstructured.Unstructured
	for _, k := range keys {
		if strings.TrimSpace(docs[k]) == "" {
			continue
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(docs[k]), &obj); err != nil {
			return nil, fmt.Errorf("rendered document %s does not parse: %w\n%s", k, err, docs[k])
		}
		if len(obj) == 0 {
			continue
		}
		objects = append(objects, &unstructured.Unstructured{Object: obj})
	}
	return objects, nil
}
