package bundle

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/crdcompat"
)

// releasesDir keeps every released bundle as rendered into the catalog and the surface of its CRDs
// (`make release-freeze`).
const releasesDir = "../../config/catalog/releases"

// TestCRDsKeepWhatReleasesPromised fails the build when a CRD change would drop a version a release served or
// stored, or a field its objects may hold: OLM would refuse the upgrade, or the API server prune the field.
func TestCRDsKeepWhatReleasesPromised(t *testing.T) {
	g := NewWithT(t)
	crds, err := crdcompat.ReadDir("../../bundle/manifests")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(crds).NotTo(BeEmpty())
	current := crdcompat.Of(crds)
	bundles, err := filepath.Glob(filepath.Join(releasesDir, "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, b := range bundles {
		surfaceFile := strings.TrimSuffix(b, ".yaml") + ".crds.json"
		data, err := os.ReadFile(surfaceFile)
		g.Expect(err).NotTo(HaveOccurred(), "every released bundle has its CRD surface beside it")
		var released crdcompat.Surface
		g.Expect(json.Unmarshal(data, &released)).To(Succeed())
		g.Expect(crdcompat.Dropped(released, current)).To(BeEmpty(), "against the release of %s", b)
	}
}
