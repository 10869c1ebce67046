package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ApplySamples server-side applies, as field manager owner, every object of the sample files in dir (namespaced ones
// into namespace), in the order dir/kustomization.yaml lists them (profiles before the Targets that use them).
func ApplySamples(ctx context.Context, c client.Client, dir, namespace, owner string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return 0, err
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		return 0, fmt.Errorf("reading %s/kustomization.yaml: %w", dir, err)
	}
	applied := 0
	for _, name := range kustomization.Resources {
		file := filepath.Join(dir, name)
		objs, err := ReadObjects(file)
		if err != nil {
			return applied, err
		}
		for _, u := range objs {
			if u.GetNamespace() == "" {
				// Cluster-scoped samples (Tenant) stay without a namespace.
				namespaced, err := c.IsObjectNamespaced(u)
				if err != nil {
					return applied, fmt.Errorf("%s %s from %s: %w", u.GetKind(), u.GetName(), file, err)
				}
				if namespaced {
					u.SetNamespace(namespace)
				}
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
				client.FieldOwner(owner), client.ForceOwnership); err != nil {
				return applied, fmt.Errorf("applying %s %s from %s: %w", u.GetKind(), u.GetName(), file, err)
			}
			ctrl.Log.Info("applied sample", "kind", u.GetKind(), "name", u.GetName())
			applied++
		}
	}
	return applied, nil
}

// ReadObjects decodes every object of a YAML or JSON file.
func ReadObjects(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := decoder.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}
