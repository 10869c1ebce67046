package olm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

// offlineCatalog is a file-based catalog that OLM installs from without pulling any image: the bundle is rendered
// from bundle/ with no image reference, so its objects travel inline as olm.bundle.object properties and the
// catalog operator applies them directly instead of running an unpack Job.
type offlineCatalog struct {
	dir string
	// docs are the catalog's documents: the package, its channels and the bundle.
	docs []document
	// bundleName, bundleImage and bundleObjects are read back from the rendered olm.bundle document.
	bundleName    string
	bundleImage   string
	bundleObjects int
}

// renderOfflineCatalog writes the package and channel of catalog/ and an image-less rendering of bundle/ into dir.
func renderOfflineCatalog(opm, dir string) (*offlineCatalog, error) {
	root := testenv.RepoRoot()
	published, err := os.ReadFile(filepath.Join(root, "catalog", packageName, "index.yaml"))
	if err != nil {
		return nil, err
	}
	var keep [][]byte
	for _, doc := range decodeDocuments(published) {
		// The published catalog points its bundle at an image; only the package and channels carry over.
		if doc.schema == "olm.package" || doc.schema == "olm.channel" {
			keep = append(keep, doc.raw)
		}
	}
	render := exec.Command(opm, "render", filepath.Join(root, "bundle"), "-o", "yaml")
	var stderr bytes.Buffer
	render.Stderr = &stderr
	rendered, err := render.Output()
	if err != nil {
		return nil, fmt.Errorf("opm render bundle/: %w: %s", err, stderr.String())
	}
	c := &offlineCatalog{dir: dir}
	for _, doc := range decodeDocuments(published) {
		if doc.schema == "olm.package" || doc.schema == "olm.channel" {
			c.docs = append(c.docs, doc)
		}
	}
	for _, doc := range decodeDocuments(rendered) {
		if doc.schema != "olm.bundle" {
			continue
		}
		c.bundleName, _ = doc.fields["name"].(string)
		c.bundleImage, _ = doc.fields["image"].(string)
		props, _ := doc.fields["properties"].([]any)
		for _, p := range props {
			if m, ok := p.(map[string]any); ok && m["type"] == "olm.bundle.object" {
				c.bundleObjects++
			}
		}
		keep = append(keep, doc.raw)
		c.docs = append(c.docs, doc)
	}
	if c.bundleName == "" {
		return nil, fmt.Errorf("opm render bundle/ printed no olm.bundle document:\n%s", rendered)
	}
	pkgDir := filepath.Join(dir, packageName)
	if err := os.MkdirAll(pkgDir, 0o755); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, raw := range keep {
		out.WriteString("---\n")
		out.Write(bytes.TrimSpace(raw))
		out.WriteString("\n")
	}
	if err := os.WriteFile(filepath.Join(pkgDir, "index.yaml"), out.Bytes(), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command(opm, "validate", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("opm validate: %w: %s", err, out)
	}
	return c, nil
}

type document struct {
	schema string
	fields map[string]any
	raw    []byte
}

// decodeDocuments splits a multi-document YAML stream, keeping each document's text and fields.
func decodeDocuments(data []byte) []document {
	var docs []document
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
		docs = append(docs, document{schema: schema, fields: fields, raw: []byte(part)})
	}
	return docs
}

// opmBinary finds the opm `make bundle` builds.
func opmBinary() (string, error) {
	path := filepath.Join(testenv.RepoRoot(), "bin", "opm")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("opm not found at %s: run `make bundle` (make test does)", path)
	}
	return path, nil
}

// withNextRelease writes into dir a catalog holding c's bundle and a next release of it, version, on the same
// channel: the entry replaces c's bundle and skips every version from it up to the new one, as `make bundle` sets
// release entries. The next release is c's bundle with the CSV renamed and re-versioned and its pod template
// annotated with the version, so the upgrade rolls the Deployment. It returns the new bundle's name.
func (c *offlineCatalog) withNextRelease(opm, dir, version string) (string, error) {
	name := packageName + ".v" + version
	var out bytes.Buffer
	write := func(doc any) error {
		data, err := sigsyaml.Marshal(doc)
		if err == nil {
			out.WriteString("---\n")
			out.Write(data)
		}
		return err
	}
	for _, doc := range c.docs {
		switch doc.schema {
		case "olm.package":
			if err := write(doc.fields); err != nil {
				return "", err
			}
		case "olm.channel":
			channel := deepCopyJSON(doc.fields)
			channel["entries"] = []any{
				map[string]any{"name": c.bundleName},
				map[string]any{"name": name, "replaces": c.bundleName,
					"skipRange": fmt.Sprintf(">=%s <%s", strings.TrimPrefix(c.bundleName, packageName+".v"), version)},
			}
			if err := write(channel); err != nil {
				return "", err
			}
		case "olm.bundle":
			if err := write(doc.fields); err != nil {
				return "", err
			}
			next, err := nextBundle(doc.fields, name, version)
			if err != nil {
				return "", err
			}
			if err := write(next); err != nil {
				return "", err
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, packageName), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, packageName, "index.yaml"), out.Bytes(), 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command(opm, "validate", dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("opm validate (next release): %w: %s", err, out)
	}
	return name, nil
}

// nextBundle is bundle with its CSV (an inline olm.bundle.object) and olm.package property moved to version.
func nextBundle(bundle map[string]any, name, version string) (map[string]any, error) {
	next := deepCopyJSON(bundle)
	next["name"] = name
	props, _ := next["properties"].([]any)
	for _, p := range props {
		prop, _ := p.(map[string]any)
		value, _ := prop["value"].(map[string]any)
		switch prop["type"] {
		case "olm.package":
			value["version"] = version
		case "olm.bundle.object":
			data, _ := value["data"].(string)
			raw, err := base64.StdEncoding.DecodeString(data)
			if err != nil {
				return nil, err
			}
			obj := map[string]any{}
			if err := json.Unmarshal(raw, &obj); err != nil {
				return nil, err
			}
			if obj["kind"] != "ClusterServiceVersion" {
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
			raw, err = json.Marshal(obj)
			if err != nil {
				return nil, err
			}
			value["data"] = base64.StdEncoding.EncodeToString(raw)
		}
	}
	return next, nil
}

func deepCopyJSON(m map[string]any) map[string]any {
	return runtime.DeepCopyJSON(m)
}

// serveCatalog runs `opm serve dir` on a free port and waits until it accepts connections; it returns the address.
// Its profiling endpoint gets a free port too (opm's default, localhost:6060, is taken by a second server).
func serveCatalog(t *testing.T, name, opm, dir string) string {
	t.Helper()
	g := NewWithT(t)
	port, err := asinstalled.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	pprofPort, err := asinstalled.FreePort()
	g.Expect(err).NotTo(HaveOccurred())
	proc, err := env.Cluster.Run(name, nil, opm, "serve", dir, "-p", strconv.Itoa(port),
		"--pprof-addr", fmt.Sprintf("127.0.0.1:%d", pprofPort), "-t", filepath.Join(t.TempDir(), "termination-log"))
	g.Expect(err).NotTo(HaveOccurred())
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	g.Eventually(func(g Gomega) {
		g.Expect(proc.Exited()).To(Succeed())
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		_ = conn.Close()
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return addr
}
