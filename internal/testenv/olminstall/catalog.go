package olminstall

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// Catalog is a file-based catalog that OLM installs from without pulling any image: the bundle is rendered from
// bundle/ with no image reference, so its objects travel inline as olm.bundle.object properties and the catalog
// operator applies them directly instead of running an unpack Job.
type Catalog struct {
	// Dir is the catalog's directory, for `opm serve`.
	Dir string
	// Docs are the catalog's documents: the package, its channels and the bundle.
	Docs []Document
	// BundleName, BundleImage and BundleObjects are read back from the rendered olm.bundle document.
	BundleName    string
	BundleImage   string
	BundleObjects int
}

// Document is one document of a catalog: its schema, its fields and its text.
type Document struct {
	Schema string
	Fields map[string]any
	Raw    []byte
}

// RenderOfflineCatalog writes the package and channel of catalog/ and an image-less rendering of bundle/ into dir.
func RenderOfflineCatalog(opm, dir string) (*Catalog, error) {
	root := testenv.RepoRoot()
	published, err := os.ReadFile(filepath.Join(root, "catalog", PackageName, "index.yaml"))
	if err != nil {
		return nil, err
	}
	render := exec.Command(opm, "render", filepath.Join(root, "bundle"), "-o", "yaml")
	var stderr bytes.Buffer
	render.Stderr = &stderr
	rendered, err := render.Output()
	if err != nil {
		return nil, fmt.Errorf("opm render bundle/: %w: %s", err, stderr.String())
	}
	c := &Catalog{Dir: dir}
	// The published catalog points its bundle at an image; only the package and channels carry over.
	for _, doc := range decodeDocuments(published) {
		if doc.Schema == "olm.package" || doc.Schema == "olm.channel" {
			c.Docs = append(c.Docs, doc)
		}
	}
	for _, doc := range decodeDocuments(rendered) {
		if doc.Schema != "olm.bundle" {
			continue
		}
		c.BundleName, _ = doc.Fields["name"].(string)
		c.BundleImage, _ = doc.Fields["image"].(string)
		props, _ := doc.Fields["properties"].([]any)
		for _, p := range props {
			if m, ok := p.(map[string]any); ok && m["type"] == "olm.bundle.object" {
				c.BundleObjects++
			}
		}
		c.Docs = append(c.Docs, doc)
	}
	if c.BundleName == "" {
		return nil, fmt.Errorf("opm render bundle/ printed no olm.bundle document:\n%s", rendered)
	}
	var out bytes.Buffer
	for _, doc := range c.Docs {
		out.WriteString("---\n")
		out.Write(bytes.TrimSpace(doc.Raw))
		out.WriteString("\n")
	}
	return c, writeCatalog(opm, dir, out.Bytes())
}

// writeCatalog writes index as the package's catalog in dir and validates it with opm.
func writeCatalog(opm, dir string, index []byte) error {
	if err := os.MkdirAll(filepath.Join(dir, PackageName), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, PackageName, "index.yaml"), index, 0o644); err != nil {
		return err
	}
	if out, err := exec.Command(opm, "validate", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("opm validate %s: %w: %s", dir, err, out)
	}
	return nil
}

// decodeDocuments splits a multi-document YAML stream, keeping each document's text and fields.
func decodeDocuments(data []byte) []Document {
	var docs []Document
	for _, part := range strings.Split("\n"+string(data), "\n---") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := map[string]any{}
		if err := yaml.Unmarshal([]byte(part), &fields); err != nil || len(fields) == 0 {
			continue
		}
		schema, _ := fields["schema"].(string)
		docs = append(docs, Document{Schema: schema, Fields: fields, Raw: []byte(part)})
	}
	return docs
}

// CSV is the ClusterServiceVersion the catalog's bundle carries inline, as OLM will create it.
func (c *Catalog) CSV() (*operatorsv1alpha1.ClusterServiceVersion, error) {
	for _, doc := range c.Docs {
		if doc.Schema != "olm.bundle" {
			continue
		}
		props, _ := doc.Fields["properties"].([]any)
		for _, p := range props {
			obj, err := bundleObject(p)
			if err != nil {
				return nil, err
			}
			if obj["kind"] != "ClusterServiceVersion" {
				continue
			}
			csv := &operatorsv1alpha1.ClusterServiceVersion{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, csv); err != nil {
				return nil, fmt.Errorf("the bundle's CSV: %w", err)
			}
			return csv, nil
		}
	}
	return nil, fmt.Errorf("the catalog's bundle %s carries no ClusterServiceVersion", c.BundleName)
}

// bundleObject decodes an olm.bundle.object property's object; nil for other properties.
func bundleObject(p any) (map[string]any, error) {
	prop, _ := p.(map[string]any)
	if prop["type"] != "olm.bundle.object" {
		return nil, nil
	}
	value, _ := prop["value"].(map[string]any)
	data, _ := value["data"].(string)
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, fmt.Errorf("olm.bundle.object: %w", err)
	}
	obj := map[string]any{}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("olm.bundle.object: %w", err)
	}
	return obj, nil
}

// WithNextRelease writes into dir a catalog holding c's bundle and a next release of it, version, on the same
// channel: the entry replaces c's bundle and skips every version from it up to the new one, as `make bundle` sets
// release entries. The next release is c's bundle with the CSV renamed and re-versioned and its pod template
// annotated with the version, so the upgrade rolls the Deployment. It returns the new bundle's name.
func (c *Catalog) WithNextRelease(opm, dir, version string) (string, error) {
	name := PackageName + ".v" + version
	var out bytes.Buffer
	write := func(doc any) error {
		data, err := sigsyaml.Marshal(doc)
		if err == nil {
			out.WriteString("---\n")
			out.Write(data)
		}
		return err
	}
	for _, doc := range c.Docs {
		switch doc.Schema {
		case "olm.package":
			if err := write(doc.Fields); err != nil {
				return "", err
			}
		case "olm.channel":
			channel := runtime.DeepCopyJSON(doc.Fields)
			channel["entries"] = []any{
				map[string]any{"name": c.BundleName},
				map[string]any{"name": name, "replaces": c.BundleName,
					"skipRange": fmt.Sprintf(">=%s <%s", strings.TrimPrefix(c.BundleName, PackageName+".v"), version)},
			}
			if err := write(channel); err != nil {
				return "", err
			}
		case "olm.bundle":
			if err := write(doc.Fields); err != nil {
				return "", err
			}
			next, err := nextBundle(doc.Fields, name, version)
			if err != nil {
				return "", err
			}
			if err := write(next); err != nil {
				return "", err
			}
		}
	}
	return name, writeCatalog(opm, dir, out.Bytes())
}

// nextBundle is bundle with its CSV (an inline olm.bundle.object) and olm.package property moved to version.
func nextBundle(bundle map[string]any, name, version string) (map[string]any, error) {
	next := runtime.DeepCopyJSON(bundle)
	next["name"] = name
	props, _ := next["properties"].([]any)
	for _, p := range props {
		prop, _ := p.(map[string]any)
		value, _ := prop["value"].(map[string]any)
		if prop["type"] == "olm.package" {
			value["version"] = version
			continue
		}
		obj, err := bundleObject(p)
		if err != nil {
			return nil, err
		}
		if obj == nil || obj["kind"] != "ClusterServiceVersion" {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetName(name)
		if err := unstructured.SetNestedField(obj, version, "spec", "version"); err != nil {
			return nil, err
		}
		deployments, _, _ := unstructured.NestedSlice(obj, "spec", "install", "spec", "deployments")
		for _, d := range deployments {
			if err := unstructured.SetNestedField(d.(map[string]any), version, "spec", "template", "metadata",
				"annotations", "quartet.dev/release"); err != nil {
				return nil, err
			}
		}
		if err := unstructured.SetNestedSlice(obj, deployments, "spec", "install", "spec", "deployments"); err != nil {
			return nil, err
		}
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, err
		}
		value["data"] = base64.StdEncoding.EncodeToString(raw)
	}
	return next, nil
}
