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
	g.Expect(froms[0]).To(MatchRegexp(`^FROM golang:1\.26\S* AS builder$`))
	g.Expect(froms[len(froms)-1]).To(Equal("FROM gcr.io/distroless/static:nonroot"))
	g.Expect(lines).To(ContainElement(And(ContainSubstring("CGO_ENABLED=0"), ContainSubstring("go build"), ContainSubstring("./cmd"))))
	g.Expect(lines).To(ContainElement("USER 65532:65532"))
	g.Expect(lines[len(lines)-1]).To(Equal(`ENTRYPOINT ["/manager"]`))
}
