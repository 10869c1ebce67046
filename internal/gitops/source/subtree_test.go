package source

import (
	"bytes"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/renderer"
)

// commitFiles commits files into an in-memory repository and returns the commit.
func commitFiles(g Gomega, files map[string]string) *object.Commit {
	fs := memfs.New()
	repo, err := git.Init(memory.NewStorage(), fs)
	g.Expect(err).NotTo(HaveOccurred())
	wt, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	for n, content := range files {
		f, err := fs.Create(n)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = f.Write([]byte(content))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f.Close()).To(Succeed())
		_, err = wt.Add(n)
		g.Expect(err).NotTo(HaveOccurred())
	}
	h, err := wt.Commit("c", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}})
	g.Expect(err).NotTo(HaveOccurred())
	c, err := repo.CommitObject(h)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"

// TestShipSubtreeForAnOverlay: an overlay naming ../../base gets the enclosing subtree with its path relative to
// it, and the renderer builds it from exactly what was shipped.
func TestShipSubtreeForAnOverlay(t *testing.T) {
	g := NewWithT(t)
	c := commitFiles(g, map[string]string{
		"deploy/base/kustomization.yaml":      "resources: [cm.yaml]\n",
		"deploy/base/cm.yaml":                 cm,
		"deploy/envs/prod/kustomization.yaml": "resources: [../../base]\nnamePrefix: prod-\n",
		"other/big.yaml":                      cm,
	})
	st, err := ShipSubtree(c, "team-a/prod", "deploy/envs/prod/", pipeline.DefaultLimits)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Root).To(Equal("deploy"))
	g.Expect(st.Target).To(Equal("envs/prod"))
	g.Expect(st.Files).To(Equal(3))
	files, err := renderer.Untar(bytes.NewReader(st.Tar), renderer.DefaultLimits)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(HaveLen(3))
	objs, _, err := renderer.Render(files, renderer.Input{Path: st.Target})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].GetName()).To(Equal("prod-c"))

	// A target that names nothing outside ships its own directory, as before.
	st, err = ShipSubtree(c, "team-a/base", "deploy/base", pipeline.DefaultLimits)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Root).To(Equal("deploy/base"))
	g.Expect(st.Target).To(BeEmpty())
}

// TestShipSubtreeOverTheLimit: the source handler refuses to ship more than the renderer accepts, naming the
// limit, the source target and the subtree.
func TestShipSubtreeOverTheLimit(t *testing.T) {
	g := NewWithT(t)
	c := commitFiles(g, map[string]string{
		"base/kustomization.yaml": "resources: [cm.yaml]\n", "base/cm.yaml": cm,
		"envs/prod/kustomization.yaml": "resources: [../../base]\n",
	})
	_, err := ShipSubtree(c, "team-a/prod", "envs/prod", pipeline.Limits{MaxBytes: 1 << 20, MaxFiles: 2})
	g.Expect(err).To(MatchError(`source target team-a/prod: the subtree "/" shipped to the renderer has more ` +
		`than 2 files (the render limit is 1048576 bytes, 2 files)`))
	_, err = ShipSubtree(c, "team-a/prod", "envs/prod", pipeline.Limits{MaxBytes: 10, MaxFiles: 100})
	g.Expect(err).To(MatchError(ContainSubstring("is larger than 10 bytes (the render limit is 10 bytes, 100 files)")))
	_, err = ShipSubtree(c, "team-a/prod", "missing", pipeline.DefaultLimits)
	g.Expect(err).To(MatchError(ContainSubstring(`path "missing"`)))
}
