package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// TestEveryRBACMarkerIsGenerated: `make manifests` generates the operator's RBAC from the markers of the paths the
// Makefile lists (RBAC_COMMON_PATHS and RBAC_PATHS_<group>); a marker anywhere else would be silently left out of
// every install.
func TestEveryRBACMarkerIsGenerated(t *testing.T) {
	g := NewWithT(t)
	root := testenv.RepoRoot()
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	var dirs []string
	for _, m := range regexp.MustCompile(`(?m)^RBAC_(?:COMMON_PATHS|PATHS_\w+) := (.+)$`).FindAllStringSubmatch(string(makefile), -1) {
		for _, p := range strings.Split(m[1], ";") {
			dirs = append(dirs, strings.TrimSuffix(strings.TrimPrefix(p, "./"), "/..."))
		}
	}
	g.Expect(dirs).To(ContainElements("internal/guard", "controllers/gitops"))
	covered := func(file string) bool {
		for _, d := range dirs {
			if strings.HasPrefix(file, d+"/") {
				return true
			}
		}
		return false
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (rel == "bin" || rel == "hack" || strings.HasPrefix(d.Name(), ".")) && rel != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), "+kubebuilder:rbac:") {
			g.Expect(covered(rel)).To(BeTrue(), "%s has RBAC markers outside the Makefile's RBAC paths", rel)
		}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
}
