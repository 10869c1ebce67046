package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// instructions returns a Dockerfile's instructions with continuation lines joined and comments dropped.
func instructions(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), name))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	joined := regexp.MustCompile(`\\\n`).ReplaceAllString(string(data), " ")
	var out []string
	for _, line := range strings.Split(joined, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

func TestManagerDockerfile(t *testing.T) {
	g := NewWithT(t)
	lines := instructions(t, "Dockerfile")
	var froms []string
	for _, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			froms = append(froms, l)
		}
	}
	g.Expect(len(froms)).To(BeNumerically(">=", 2), "multi-stage build")
	// The builder cross-compiles on the build machine's platform: a multi-arch build needs no emulation.
	g.Expect(froms[0]).To(MatchRegexp(`^FROM --platform=\$BUILDPLATFORM golang:1\.26\S* AS builder$`))
	g.Expect(lines).To(ContainElement(ContainSubstring("GOARCH=${TARGETARCH}")))
	g.Expect(froms[len(froms)-1]).To(MatchRegexp(`^FROM gcr\.io/distroless/static:nonroot@sha256:[0-9a-f]{64}$`),
		"the runtime base is pinned by digest")
	g.Expect(lines).To(ContainElement(And(ContainSubstring("CGO_ENABLED=0"), ContainSubstring("go build"), ContainSubstring("./cmd"))))
	g.Expect(lines).To(ContainElement("USER 65532:65532"))
	g.Expect(lines[len(lines)-1]).To(Equal(`ENTRYPOINT ["/manager"]`))

	// Certification: the licence inside the image and the labels preflight requires.
	g.Expect(lines).To(ContainElement("COPY LICENSE /licenses/LICENSE"))
	g.Expect(filepath.Join(testenv.RepoRoot(), "LICENSE")).To(BeAnExistingFile())
	labels := dockerfileLabels(lines)
	for _, key := range []string{"name", "vendor", "version", "release", "summary", "description", "maintainer"} {
		g.Expect(labels).To(HaveKeyWithValue(key, Not(BeEmpty())), "LABEL %s", key)
	}
	g.Expect(labels).To(HaveKeyWithValue("org.opencontainers.image.licenses", "Apache-2.0"))
	makefile, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Makefile"))
	g.Expect(err).NotTo(HaveOccurred())
	version := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(makefile)
	g.Expect(version).NotTo(BeNil())
	g.Expect(lines).To(ContainElement("ARG VERSION="+string(version[1])), "the image's default version label follows the Makefile")
}

// dockerfileLabels reads every LABEL key="value" pair (quoted values, as this Dockerfile writes them).
func dockerfileLabels(lines []string) map[string]string {
	pair := regexp.MustCompile(`([A-Za-z0-9._-]+)="([^"]*)"`)
	out := map[string]string{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "LABEL ") {
			continue
		}
		for _, m := range pair.FindAllStringSubmatch(l, -1) {
			out[m[1]] = m[2]
		}
	}
	return out
}
