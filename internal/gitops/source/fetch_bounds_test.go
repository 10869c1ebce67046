package source

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
)

// TestFetchOverTheSizeLimitFails: a repository whose commit is larger than the fetch size limit fails the fetch
// with a reason naming the limit, instead of filling the source handler's memory.
func TestFetchOverTheSizeLimitFails(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	g.Expect(err).NotTo(HaveOccurred())
	wt, err := repo.Worktree()
	g.Expect(err).NotTo(HaveOccurred())
	big := make([]byte, 2<<20) // random: does not compress
	_, _ = rand.Read(big)
	g.Expect(os.WriteFile(filepath.Join(dir, "blob.bin"), big, 0o644)).To(Succeed())
	_, err = wt.Add("blob.bin")
	g.Expect(err).NotTo(HaveOccurred())
	sha, err := wt.Commit("big", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = FetchCommitBounded(context.Background(), "file://"+dir, "master", sha.String(), nil, 1<<20)
	g.Expect(err).To(MatchError(ContainSubstring("over the fetch size limit of 1048576 bytes")))
	c, err := FetchCommitBounded(context.Background(), "file://"+dir, "master", sha.String(), nil, 8<<20)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Hash).To(Equal(sha))
}

// TestFetchesPerTenantAreBounded: one tenant holds at most its share of the fetch slots; another tenant still
// gets one while the first waits.
func TestFetchesPerTenantAreBounded(t *testing.T) {
	g := NewWithT(t)
	slots := &tenantSlots{max: 2}
	ctx := context.Background()
	g.Expect(slots.acquire(ctx, "noisy")).To(Succeed())
	g.Expect(slots.acquire(ctx, "noisy")).To(Succeed())
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	g.Expect(slots.acquire(short, "noisy")).To(MatchError(context.DeadlineExceeded), "a third fetch of the same tenant waits")
	g.Expect(slots.acquire(ctx, "quiet")).To(Succeed(), "another tenant is not held up")
	slots.release("noisy")
	g.Expect(slots.acquire(ctx, "noisy")).To(Succeed())
}
