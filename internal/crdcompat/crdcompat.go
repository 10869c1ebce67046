// Package crdcompat keeps what a released set of CRDs promised: the versions it served and stored, and the fields
// each version's schema held. A later release must keep all of it — dropping a stored version strands objects in
// etcd, and dropping a field prunes what existing objects hold on their next write.
package crdcompat

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Surface is what one release's CRDs promise, keyed by CRD name.
type Surface map[string]CRDSurface

// CRDSurface is one CRD's versions and, per version, the dotted paths of its schema's fields ("spec.replicas",
// "spec.targets[].address").
type CRDSurface struct {
	Versions map[string][]string `json:"versions"`
	// Stored lists the versions objects may be stored in (the storage version of this release).
	Stored []string `json:"stored"`
}

// Of computes the surface of crds.
func Of(crds []apiextensionsv1.CustomResourceDefinition) Surface {
	s := Surface{}
	for _, crd := range crds {
		c := CRDSurface{Versions: map[string][]string{}}
		for _, v := range crd.Spec.Versions {
			if !v.Served && !v.Storage {
				continue
			}
			var fields []string
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				collect(v.Schema.OpenAPIV3Schema, "", &fields)
			}
			sort.Strings(fields)
			c.Versions[v.Name] = fields
			if v.Storage {
				c.Stored = append(c.Stored, v.Name)
			}
		}
		s[crd.Name] = c
	}
	return s
}

func collect(p *apiextensionsv1.JSONSchemaProps, prefix string, out *[]string) {
	for name, child := range p.Properties {
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		*out = append(*out, path)
		collect(&child, path, out)
	}
	if p.Items != nil && p.Items.Schema != nil {
		collect(p.Items.Schema, prefix+"[]", out)
	}
	if p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil {
		collect(p.AdditionalProperties.Schema, prefix+"{}", out)
	}
}

// Dropped lists, in a stable order, what next no longer offers of released: a CRD, a version that was stored (or
// served), or a field of a version.
func Dropped(released, next Surface) []string {
	var out []string
	for _, name := range sortedKeys(released) {
		old := released[name]
		cur, ok := next[name]
		if !ok {
			out = append(out, fmt.Sprintf("CRD %s is gone", name))
			continue
		}
		for _, v := range sortedKeys(old.Versions) {
			fields, ok := cur.Versions[v]
			if !ok {
				what := "served"
				if slices.Contains(old.Stored, v) {
					what = "stored"
				}
				out = append(out, fmt.Sprintf("CRD %s: version %s (%s by the release) is gone", name, v, what))
				continue
			}
			for _, f := range old.Versions[v] {
				if _, found := slices.BinarySearch(fields, f); !found {
					out = append(out, fmt.Sprintf("CRD %s %s: field %s is gone", name, v, f))
				}
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ReadDir reads every CustomResourceDefinition among the YAML files of dir (a bundle's manifests).
func ReadDir(dir string) ([]apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil || crd.Kind != "CustomResourceDefinition" {
			continue
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
