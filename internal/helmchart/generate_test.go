package helmchart

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestCommittedChartIsCurrent: the chart in the repository is what `make helm-chart` writes from config/ now
// (`make verify` checks the same through regeneration).
func TestCommittedChartIsCurrent(t *testing.T) {
	g := NewWithT(t)
	out := t.TempDir()
	g.Expect(Generate(Options{Root: repoRoot(), Version: "0.1.0", Out: out})).To(Succeed())
	committed := filepath.Join(repoRoot(), ChartDir)
	g.Expect(files(t, out)).To(Equal(files(t, committed)), "run `make helm-chart` and commit the chart")
}

func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	contents := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		contents[rel] = string(raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return contents
}

// TestDefaultsMustBeConfigDefaults: a default in values.yaml that differs from config/ fails the generation,
// naming the value.
func TestDefaultsMustBeConfigDefaults(t *testing.T) {
	objects, err := Build(repoRoot())
	if err != nil {
		t.Fatal(err)
	}
	var deployment map[string]any
	for _, o := range objects {
		if o["kind"] == "Deployment" {
			deployment = o
		}
	}
	for _, tc := range []struct {
		value  string
		change func(values map[string]any)
	}{
		{"replicaCount", func(v map[string]any) { v["replicaCount"] = 3 }},
		{"resources", func(v map[string]any) { v["resources"].(map[string]any)["limits"] = map[string]any{"cpu": "1"} }},
		{"podSecurityContext", func(v map[string]any) { v["podSecurityContext"] = map[string]any{} }},
		{"securityContext", func(v map[string]any) { v["securityContext"].(map[string]any)["readOnlyRootFilesystem"] = false }},
		{"image", func(v map[string]any) { v["image"].(map[string]any)["repository"] = "example.com/other" }},
		{"leaderElection.enabled", func(v map[string]any) { v["leaderElection"].(map[string]any)["enabled"] = false }},
	} {
		t.Run(tc.value, func(t *testing.T) {
			g := NewWithT(t)
			values, err := readValues(filepath.Join(repoRoot(), SourceDir, "values.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(checkDefaults(deployment, values, "0.1.0")).To(Succeed())
			tc.change(values)
			g.Expect(checkDefaults(deployment, values, "0.1.0")).To(MatchError(ContainSubstring("the default of " + tc.value)))
		})
	}
}
