package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
)

// SplitYAML decodes a multi-document YAML (or JSON) stream into objects, skipping empty documents and flattening
// v1 List objects. Every object needs apiVersion, kind and metadata.name.
func SplitYAML(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
			for j := range l.Items {
				item := l.Items[j]
				if err := checkObject(&item); err != nil {
					return nil, fmt.Errorf("document %d item %d: %w", i, j, err)
				}
				out = append(out, &item)
			}
			continue
		}
		if err := checkObject(u); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, u)
	}
}

func checkObject(u *unstructured.Unstructured) error {
	switch {
	case u.GetAPIVersion() == "":
		return errors.New("apiVersion is missing")
	case u.GetKind() == "":
		return errors.New("kind is missing")
	case u.GetName() == "" && u.GetGenerateName() == "":
		return fmt.Errorf("%s has no metadata.name", u.GetKind())
	}
	return nil
}

// Decode parses one manifest message into an object.
func Decode(m *katastromav1.Manifest) (*unstructured.Unstructured, error) {
	objs, err := SplitYAML(m.GetManifest())
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("a manifest message holds %d objects, want 1", len(objs))
	}
	return objs[0], nil
}

// Encode turns an object into a manifest message (JSON, which is valid YAML).
func Encode(u *unstructured.Unstructured) (*katastromav1.Manifest, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &katastromav1.Manifest{Manifest: b}, nil
}

// Ref returns the object reference of u.
func Ref(u *unstructured.Unstructured) *katastromav1.ObjectRef {
	return &katastromav1.ObjectRef{ApiVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(),
		Name: u.GetName()}
}

// RefObject returns a minimal object for a reference (what the orderer needs to sort it).
func RefObject(r *katastromav1.ObjectRef) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(r.GetApiVersion())
	u.SetKind(r.GetKind())
	u.SetNamespace(r.GetNamespace())
	u.SetName(r.GetName())
	return u
}

// RefKey is the identity of a referenced object: group, kind, namespace and name. The version is left out on
// purpose: one object is served under each version of its kind, so autoscaling/v1 and autoscaling/v2 (or two
// versions of a CRD) name the same object, and keying by version would make an apiVersion change look like a
// removal and prune the object just applied.
func RefKey(r *katastromav1.ObjectRef) string {
	gv, _ := schema.ParseGroupVersion(r.GetApiVersion())
	return gv.Group + "/" + r.GetKind() + "/" + r.GetNamespace() + "/" + r.GetName()
}

// MarshalYAML renders an object as YAML (for logs and docs).
func MarshalYAML(u *unstructured.Unstructured) ([]byte, error) { return yaml.Marshal(u.Object) }
