package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// AssetsDir is where `make realnode` links the node's binaries: $REALNODE_ASSETS, else bin/realnode.
func AssetsDir() string {
	if dir := os.Getenv("REALNODE_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(testenv.RepoRoot(), "bin", "realnode")
}

// binaries are the files `make realnode` links into AssetsDir.
var binaries = []string{
	"runc", "containerd", "containerd-shim-runc-v2", "ctr", "kubelet", "kube-proxy", "kube-router", "coredns",
	"cni/bridge", "cni/loopback", "cni/host-local", "cni/portmap",
}

// Preflight says why a real node cannot run on this machine, or nil: it needs root, the node's binaries, the
// Debian tools the node programs the kernel with, overlayfs, cgroups, bridged traffic passing the netfilter hooks
// (br_netfilter, or NetworkPolicies between pods on the bridge are not enforced) and a free bridge name.
func Preflight() error {
	var problems []string
	if os.Geteuid() != 0 {
		problems = append(problems, "not root (containerd, the kubelet and the CNI plugins need root)")
	}
	assets := AssetsDir()
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			problems = append(problems, fmt.Sprintf("%s missing in %s (run `make realnode`)", b, assets))
		}
	}
	for _, tool := range []string{"nft", "iptables", "ipset", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			problems = append(problems, tool+" not found (run `make realnode-deps` as root)")
		}
	}
	if fs, err := os.ReadFile("/proc/filesystems"); err != nil || !strings.Contains(string(fs), "\toverlay\n") {
		problems = append(problems, "the kernel has no overlay filesystem (containerd's overlayfs snapshotter)")
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err != nil {
		problems = append(problems, "no cgroup hierarchy at /sys/fs/cgroup")
	}
	if v, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil || strings.TrimSpace(string(v)) != "1" {
		problems = append(problems, "net.bridge.bridge-nf-call-iptables is not 1 (br_netfilter): bridged pod traffic would bypass the NetworkPolicy firewall")
	}
	if _, err := os.Stat("/sys/class/net/" + BridgeName); err == nil {
		problems = append(problems, "the bridge "+BridgeName+" exists already (another real node runs, or one was not torn down)")
	}
	if len(problems) > 0 {
		return errors.New("a real node cannot run here: " + strings.Join(problems, "; "))
	}
	return nil
}

// Require skips the test when Preflight fails, and fails it under CI=true, where the real node is expected.
func Require(t testing.TB) {
	t.Helper()
	if err := Preflight(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}
