package realnode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/images"
)

// TestContainerdRunsTheOfflinePauseImage checks the runtime half of the node without a control plane: containerd
// with the node's configuration starts, imports the offline-built pause image and runs it with the runc built from
// Go modules (the Debian runc fails every container of containerd 2.4).
func TestContainerdRunsTheOfflinePauseImage(t *testing.T) {
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		if _, err := os.Stat(filepath.Join(AssetsDir(), b)); err != nil || os.Geteuid() != 0 {
			msg := "needs root and " + b + " in " + AssetsDir() + " (make realnode)"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pause := filepath.Join(dir, "pause-bin")
	g.Expect(images.GoBuild(ctx, testenv.RepoRoot(), "./internal/testenv/images/pause", pause)).To(Succeed())
	img, err := images.Build(images.PauseSpec(pause))
	g.Expect(err).NotTo(HaveOccurred())
	archive := filepath.Join(dir, "images.tar")
	g.Expect(images.WriteArchive(archive, map[string]v1.Image{images.PauseRef: img})).To(Succeed())

	// ctr run puts containers in the cgroup /<namespace> (k8s.io); it goes with the test unless it existed.
	cgroupsBefore, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	n := &Node{Dir: dir, assets: AssetsDir()}
	cfg, err := n.write("containerd/config.toml", containerdConfig(dir, n.assets, images.PauseRef))
	g.Expect(err).NotTo(HaveOccurred())
	logFile, err := os.Create(filepath.Join(dir, "containerd.log"))
	g.Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(filepath.Join(n.assets, "containerd"), "--config", cfg)
	cmd.Env = append(os.Environ(), "PATH="+n.assets+":"+os.Getenv("PATH"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = killShims(dir)
		_ = unmountUnder(dir)
		cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
		for _, cg := range cgroups {
			if !slices.Contains(cgroupsBefore, cg) {
				if err := removeCgroupTree(cg); err != nil {
					t.Error(err)
				}
			}
		}
		if t.Failed() {
			log, _ := os.ReadFile(logFile.Name())
			t.Logf("containerd log:\n%s", log)
		}
	})
	g.Eventually(func() error { _, err := n.ctr(ctx, "version"); return err }, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	_, err = n.ctr(ctx, "images", "import", archive)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := n.ctr(ctx, "images", "list", "-q")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Fields(out)).To(ContainElement(images.PauseRef))

	_, err = n.ctr(ctx, "run", "--detach", "--null-io", images.PauseRef, "pause-smoke")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (string, error) { return n.ctr(ctx, "tasks", "list") }, 20*time.Second, 250*time.Millisecond).
		Should(MatchRegexp(`pause-smoke\s+\d+\s+RUNNING`))
	_, err = n.ctr(ctx, "tasks", "kill", "--signal", "SIGTERM", "pause-smoke")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() (string, error) { return n.ctr(ctx, "tasks", "list") }, 20*time.Second, 250*time.Millisecond).
		Should(MatchRegexp(`pause-smoke\s+\d+\s+STOPPED`), "the pause binary stops on SIGTERM")
	_, err = n.ctr(ctx, "tasks", "delete", "pause-smoke")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = n.ctr(ctx, "containers", "delete", "pause-smoke")
	g.Expect(err).NotTo(HaveOccurred())
}
