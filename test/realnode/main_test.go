// Package realnode runs pods for real: a kubelet with containerd, runc and the CNI bridge beside the simulated nodes
// of the cluster-grade control plane, pods from images built offline, Services routed by kube-proxy (nftables) and
// NetworkPolicies enforced by kube-router's firewall; OLM installs the operator's bundle and its Deployment runs
// the operator image there. It needs root and the binaries of `make realnode` (and `make olm`, opm); without the
// node's it is skipped, and under CI=true it fails saying what is missing.
package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/images"
	"github.com/quartet-dev/quartet-operator/internal/testenv/olminstall"
	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

var (
	env  *testenv.Env
	node *realnode.Node
	// olmDir holds OLM's binaries and CRDs (`make olm`).
	olmDir string
)

// netprobeRef is the test workload's image (./test/realnode/netprobe), built offline.
const netprobeRef = "quartet.test/netprobe:v1"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if err := realnode.Preflight(); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "realnode:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "realnode: skipped:", err)
		return 0
	}
	// OLM installs the operator here (olm_test.go); a missing OLM build fails the package, as it does test/olm.
	var err error
	if olmDir, err = olminstall.Binaries(); err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	gomega.SetDefaultEventuallyTimeout(90 * time.Second)
	gomega.SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	work, err := os.MkdirTemp("", "quartet-realnode-images-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	started := time.Now()
	archive, err := buildImages(ctx, work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode: building images:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "realnode: images built offline in %s\n", time.Since(started).Round(time.Second))
	// No manager runs in this process: the operator's webhooks are the ones OLM installs for its pod
	// (olm_test.go), so envtest's configurations, which would call this process, are left out. OLM's CRDs are
	// there from the start: removed at a test's end, they would wait for finalizers only OLM removes.
	env, err = testenv.Start(testenv.Options{WithoutWebhooks: true, ExtraCRDPaths: []string{olminstall.CRDs(olmDir)},
		Cluster: realnode.ClusterOptions(1)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: stopping:", err)
		}
	}()
	started = time.Now()
	node, err = realnode.Start(ctx, env, realnode.Options{ImageArchives: []string{archive}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "realnode:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "realnode: node %s Ready in %s\n", node.Name, time.Since(started).Round(time.Second))
	code := m.Run()
	started = time.Now()
	if err := node.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "realnode: teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	fmt.Fprintf(os.Stderr, "realnode: torn down in %s\n", time.Since(started).Round(time.Second))
	return code
}

// buildImages builds the pause and netprobe binaries and writes both images into one archive.
func buildImages(ctx context.Context, dir string) (string, error) {
	root := testenv.RepoRoot()
	pause, probe := filepath.Join(dir, "pause"), filepath.Join(dir, "netprobe")
	if err := images.GoBuild(ctx, root, "./internal/testenv/images/pause", pause); err != nil {
		return "", err
	}
	if err := images.GoBuild(ctx, root, "./test/realnode/netprobe", probe); err != nil {
		return "", err
	}
	imgs := map[string]v1.Image{}
	for _, spec := range []images.Spec{images.PauseSpec(pause), images.StaticBinarySpec(netprobeRef, probe)} {
		img, err := images.Build(spec)
		if err != nil {
			return "", err
		}
		imgs[spec.Ref] = img
	}
	archive := filepath.Join(dir, "images.tar")
	return archive, images.WriteArchive(archive, imgs)
}
