package bundle

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"
)

const packageName = "quartet-operator"

// TestCSVMetadata pins the listing: what OperatorHub shows and what OLM installs with.
func TestCSVMetadata(t *testing.T) {
	g := NewWithT(t)
	c := csv(t)
	g.Expect(c.Name).To(Equal(packageName + ".v" + c.Spec.Version.String()))
	g.Expect(c.Spec.DisplayName).To(Equal("Quartet Operator"))
	g.Expect(c.Spec.Maturity).To(Equal("alpha"))
	g.Expect(c.Spec.MinKubeVersion).To(Equal("1.30.0"))
	g.Expect(c.Spec.Provider.Name).To(Equal("Quartet"))
	g.Expect(c.Spec.Maintainers).To(ContainElement(And(
		HaveField("Name", "Quartet maintainers"), HaveField("Email", "maintainers@quartet.dev"))))
	g.Expect(c.Spec.Links).To(ContainElement(HaveField("URL", "https://github.com/quartet-dev/quartet-operator")))
	g.Expect(c.Spec.Icon).To(HaveLen(1))
	g.Expect(c.Spec.Icon[0].MediaType).To(Equal("image/svg+xml"))
	g.Expect(c.Spec.Keywords).NotTo(BeEmpty())
	for _, group := range []string{"fleetmanagement.grafana.com", "operator.gnmic.dev", "agentrax.io", "katastroma.org"} {
		g.Expect(c.Spec.Description).To(ContainSubstring(group), "the description covers every group")
	}

	a := c.Annotations
	g.Expect(a).To(HaveKeyWithValue("capabilities", "Basic Install"))
	g.Expect(strings.Split(a["categories"], ",")).To(ConsistOf(
		"AI/Machine Learning", "Integration & Delivery", "Monitoring", "Networking"))
	g.Expect(a).To(HaveKeyWithValue("repository", "https://github.com/quartet-dev/quartet-operator"))
	g.Expect(a).To(HaveKey("support"))
	g.Expect(a).To(HaveKey("description"))
	g.Expect(a["createdAt"]).To(MatchRegexp(`^\d{4}-\d\d-\d\dT00:00:00Z$`), "createdAt is pinned to a day, not stamped per run")
	for _, f := range []string{"disconnected", "fips-compliant", "proxy-aware", "tls-profiles", "token-auth-aws", "token-auth-azure", "token-auth-gcp"} {
		g.Expect(a).To(HaveKeyWithValue("features.operators.openshift.io/"+f, BeElementOf("true", "false")))
	}

	// The manager image is everywhere the same: containerImage, the deployment and relatedImages.
	var images []string
	for _, d := range c.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			images = append(images, ctr.Image)
		}
	}
	g.Expect(images).To(ContainElement(a["containerImage"]))
	for _, img := range images {
		g.Expect(c.Spec.RelatedImages).To(ContainElement(HaveField("Image", img)), "relatedImages lists %s", img)
	}
	// Every image the operator starts (collectors, katastroma stages) is a RELATED_IMAGE_* variable that the
	// manager takes as its default and relatedImages lists, so image mirroring tools find it.
	related := map[string]string{}
	for _, d := range c.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, ctr := range d.Spec.Template.Spec.Containers {
			for _, e := range ctr.Env {
				if strings.HasPrefix(e.Name, "RELATED_IMAGE_") {
					related[e.Name] = e.Value
					g.Expect(c.Spec.RelatedImages).To(ContainElement(HaveField("Image", e.Value)), "relatedImages lists %s", e.Name)
				}
			}
			g.Expect(ctr.Args).To(ContainElements("--gnmic-default-image=$(RELATED_IMAGE_GNMIC)",
				"--katastroma-default-image=$(RELATED_IMAGE_KATASTROMA)"))
		}
	}
	g.Expect(related).To(HaveKey("RELATED_IMAGE_GNMIC"))
	g.Expect(related).To(HaveKeyWithValue("RELATED_IMAGE_KATASTROMA", a["containerImage"]), "the stages run the manager's image")
	// OperatorHub shows and filters by the architectures the CSV declares: exactly those `make docker-buildx` builds.
	makefile, err := os.ReadFile(repoPath("Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	platforms := regexp.MustCompile(`(?m)^PLATFORMS \?= (\S+)$`).FindSubmatch(makefile)
	g.Expect(platforms).NotTo(BeNil(), "the Makefile sets PLATFORMS")
	wantArch := map[string]string{"operatorframework.io/os.linux": "supported"}
	for _, p := range strings.Split(string(platforms[1]), ",") {
		wantArch["operatorframework.io/arch."+strings.TrimPrefix(p, "linux/")] = "supported"
	}
	gotArch := map[string]string{}
	for k, v := range c.Labels {
		if strings.HasPrefix(k, "operatorframework.io/arch.") || strings.HasPrefix(k, "operatorframework.io/os.") {
			gotArch[k] = v
		}
	}
	g.Expect(gotArch).To(Equal(wantArch))
	// Mirrors serve images by digest only: the disconnected feature is declared exactly when every image is pinned.
	pinned := true
	for _, r := range c.Spec.RelatedImages {
		pinned = pinned && strings.Contains(r.Image, "@sha256:")
	}
	g.Expect(a["features.operators.openshift.io/disconnected"]).To(Equal(strconv.FormatBool(pinned)))

	modes := map[operatorsv1alpha1.InstallModeType]bool{}
	for _, m := range c.Spec.InstallModes {
		modes[m.Type] = m.Supported
	}
	g.Expect(modes).To(Equal(map[operatorsv1alpha1.InstallModeType]bool{
		operatorsv1alpha1.InstallModeTypeOwnNamespace:    false,
		operatorsv1alpha1.InstallModeTypeSingleNamespace: false,
		operatorsv1alpha1.InstallModeTypeMultiNamespace:  false,
		operatorsv1alpha1.InstallModeTypeAllNamespaces:   true,
	}), "install modes as documented in docs/install.md")
}

// TestNoCertManagerObjects: OLM issues the webhook certificates, so the bundle carries no cert-manager objects or
// CA-injection annotations.
func TestNoCertManagerObjects(t *testing.T) {
	g := NewWithT(t)
	for _, obj := range theBundle(t).Objects {
		g.Expect(obj.GroupVersionKind().Group).NotTo(Equal("cert-manager.io"), "%s %s", obj.GetKind(), obj.GetName())
		g.Expect(obj.GetAnnotations()).NotTo(HaveKey("cert-manager.io/inject-ca-from"), "%s %s", obj.GetKind(), obj.GetName())
	}
	for _, d := range csv(t).Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, v := range d.Spec.Template.Spec.Volumes {
			// OpenShift's service CA fills the metrics Service's serving-cert Secret; it is mounted optional, so
			// the pod starts where nothing creates it. A required certificate Secret would wait for cert-manager.
			if v.Secret != nil && strings.HasSuffix(v.Secret.SecretName, "-cert") {
				g.Expect(v.Secret.Optional).To(HaveValue(BeTrue()), "deployment %s mounts the certificate Secret %s, which only cert-manager would create", d.Name, v.Secret.SecretName)
			}
		}
	}
}

// annotations reads bundle/metadata/annotations.yaml.
func annotations(t *testing.T) map[string]string {
	t.Helper()
	var f struct {
		Annotations map[string]string `json:"annotations"`
	}
	data, err := os.ReadFile(repoPath("bundle", "metadata", "annotations.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(yaml.Unmarshal(data, &f)).To(Succeed())
	return f.Annotations
}

// TestBundleImageMetadata: annotations.yaml, the bundle.Dockerfile labels and the scorecard configuration agree.
func TestBundleImageMetadata(t *testing.T) {
	g := NewWithT(t)
	a := annotations(t)
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.bundle.mediatype.v1", "registry+v1"))
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.bundle.manifests.v1", "manifests/"))
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.bundle.metadata.v1", "metadata/"))
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.bundle.package.v1", packageName))
	// Channel names follow https://olm.operatorframework.io/docs/best-practices/channel-naming (the good-practices
	// validator warns otherwise): candidate for these pre-release (maturity alpha) versions.
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.bundle.channels.v1", "candidate"))
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.bundle.channel.default.v1", "candidate"))
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.test.mediatype.v1", "scorecard+v1"))
	g.Expect(a).To(HaveKeyWithValue("operators.operatorframework.io.test.config.v1", "tests/scorecard/"))

	data, err := os.ReadFile(repoPath("bundle.Dockerfile"))
	g.Expect(err).NotTo(HaveOccurred())
	labels := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^LABEL (\S+)=(\S+)$`).FindAllStringSubmatch(string(data), -1) {
		labels[m[1]] = m[2]
	}
	g.Expect(labels).To(Equal(a), "bundle.Dockerfile LABELs must equal bundle/metadata/annotations.yaml")
	g.Expect(string(data)).To(MatchRegexp(`(?m)^FROM scratch$`))
	for _, dir := range []string{"manifests", "metadata", "tests/scorecard"} {
		g.Expect(string(data)).To(MatchRegexp(`(?m)^COPY bundle/%s /%s/$`, regexp.QuoteMeta(dir), regexp.QuoteMeta(dir)))
	}

	var cfg struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Stages     []struct {
			Tests []struct {
				Labels map[string]string `json:"labels"`
			} `json:"tests"`
		} `json:"stages"`
	}
	data, err = os.ReadFile(repoPath("bundle", "tests", "scorecard", "config.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, &cfg)).To(Succeed())
	g.Expect(cfg.APIVersion).To(Equal("scorecard.operatorframework.io/v1alpha3"))
	g.Expect(cfg.Kind).To(Equal("Configuration"))
	tests := sets.New[string]()
	for _, s := range cfg.Stages {
		for _, tc := range s.Tests {
			tests.Insert(tc.Labels["test"])
		}
	}
	g.Expect(sets.List(tests)).To(ConsistOf("basic-check-spec-test", "olm-bundle-validation-test",
		"olm-crds-have-validation-test", "olm-crds-have-resources-test", "olm-spec-descriptors-test",
		"olm-status-descriptors-test"))
}

// TestFileBasedCatalog: catalog/ holds the package, its default channel with this bundle and every frozen release,
// the bundle with the GVKs the CSV owns, and the releases' bundles.
func TestFileBasedCatalog(t *testing.T) {
	g := NewWithT(t)
	c := csv(t)
	a := annotations(t)
	var pkgs, channels, bundles int
	// Frozen releases' bundles are in the catalog too, each named <package>.v<version> after its file.
	frozen, err := filepath.Glob(repoPath("config", "catalog", "releases", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var released []any
	for _, f := range frozen {
		released = append(released, packageName+".v"+strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	for _, obj := range documents(t, repoPath("catalog", packageName, "index.yaml")) {
		switch obj.Object["schema"] {
		case "olm.package":
			pkgs++
			g.Expect(obj.Object["name"]).To(Equal(packageName))
			g.Expect(obj.Object["defaultChannel"]).To(Equal(a["operators.operatorframework.io.bundle.channel.default.v1"]))
			g.Expect(obj.Object).To(HaveKey("icon"))
		case "olm.channel":
			channels++
			g.Expect(obj.Object["package"]).To(Equal(packageName))
			g.Expect(strings.Split(a["operators.operatorframework.io.bundle.channels.v1"], ",")).To(ContainElement(obj.Object["name"]))
			g.Expect(obj.Object["entries"]).To(ContainElement(HaveKeyWithValue("name", c.Name)))
			for _, r := range released {
				g.Expect(obj.Object["entries"]).To(ContainElement(HaveKeyWithValue("name", r)), "every release stays in the channel")
			}
		case "olm.bundle":
			if obj.Object["name"] != c.Name {
				// A frozen release (config/catalog/releases), kept as it was rendered.
				g.Expect(released).To(ContainElement(obj.Object["name"]), "a bundle that is neither this one nor a release")
				continue
			}
			bundles++
			g.Expect(obj.Object["package"]).To(Equal(packageName))
			g.Expect(obj.Object["image"]).To(MatchRegexp(`^ghcr\.io/quartet-dev/quartet-operator-bundle:v` + regexp.QuoteMeta(c.Spec.Version.String()) + `$`))
			var gvks []string
			for _, p := range obj.Object["properties"].([]any) {
				prop := p.(map[string]any)
				if prop["type"] == "olm.gvk" {
					v := prop["value"].(map[string]any)
					gvks = append(gvks, v["group"].(string)+"/"+v["version"].(string)+"/"+v["kind"].(string))
				}
			}
			var owned []string
			for _, crd := range theBundle(t).V1CRDs {
				// opm provides every version of a CRD, served or not.
				for _, v := range crd.Spec.Versions {
					owned = append(owned, crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind)
				}
			}
			g.Expect(gvks).To(ConsistOf(owned))
		}
	}
	g.Expect([]int{pkgs, channels, bundles}).To(Equal([]int{1, len(strings.Split(a["operators.operatorframework.io.bundle.channels.v1"], ",")), 1}))
}

// TestCSVUpgradeGraphMatchesTheCatalog: community-operators reads the upgrade graph from the CSV (spec.replaces,
// spec.skips, the olm.skipRange annotation); our catalog reads it from the template's channel entries. Both must say
// the same for this bundle in every channel, and the CSV must say something, so an upgrade from an earlier build is
// possible even on an index that knows only the CSV.
func TestCSVUpgradeGraphMatchesTheCatalog(t *testing.T) {
	g := NewWithT(t)
	c := csv(t)
	skipRange := c.Annotations["olm.skipRange"]
	g.Expect(c.Spec.Replaces != "" || skipRange != "").To(BeTrue(),
		"the CSV names its predecessor (spec.replaces) or the versions it upgrades from (olm.skipRange)")
	found := 0
	for _, obj := range documents(t, repoPath("catalog", packageName, "index.yaml")) {
		if obj.Object["schema"] != "olm.channel" {
			continue
		}
		for _, e := range obj.Object["entries"].([]any) {
			entry := e.(map[string]any)
			if entry["name"] != c.Name {
				continue
			}
			found++
			g.Expect(fmt.Sprint(entry["replaces"])).To(Equal(orNil(c.Spec.Replaces)), "channel %v: replaces", obj.Object["name"])
			g.Expect(fmt.Sprint(entry["skipRange"])).To(Equal(orNil(skipRange)), "channel %v: skipRange", obj.Object["name"])
			g.Expect(fmt.Sprint(entry["skips"])).To(Equal(orNil(strings.Join(c.Spec.Skips, " "), "[", "]")),
				"channel %v: skips", obj.Object["name"])
		}
	}
	g.Expect(found).To(BeNumerically(">", 0), "the catalog has a channel entry for %s", c.Name)
}

// orNil is how fmt prints the catalog's value for s: <nil> when the entry has none, else s (in brackets for a list).
func orNil(s string, brackets ...string) string {
	if s == "" {
		return "<nil>"
	}
	if len(brackets) == 2 {
		return brackets[0] + s + brackets[1]
	}
	return s
}
