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
	"slices"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
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
const netprobeRef = devstack.NetprobeRef

// mcpAgentRef is the MCP test agent's image (./test/realnode/mcpagent), built offline.
const mcpAgentRef = "quartet.test/mcpagent:v1"

// registryURL is the agentrax MCP registry API of the in-process manager (plain HTTP on loopback: reads only).
var registryURL atomic.Value

// gnmicControllers are the operator's controllers this package runs in-process: the gnmic collector pods run
// for real on the node (gnmicpods_test.go), and the operator reaches them as it would in a cluster, by their
// DNS names through the cluster DNS, with no dial map.
var gnmicControllers = []string{gnmic.ClusterControllerName, gnmic.PipelineControllerName, gnmic.TargetControllerName,
	gnmic.TargetProfileControllerName, gnmic.CollectorResourceControllerName}

// agentraxControllers run the agents of agentpods_test.go as real pods; the registry discovers them by their
// Services' names, resolved by the cluster DNS.
var agentraxControllers = []string{agentrax.AgentDeploymentControllerName, agentrax.TenantQuotaControllerName}

// admissionPlugins are enabled in the API server on top of its defaults (--enable-admission-plugins adds to
// them): AgentDeployments say nothing about nodes, so a platform team steers a namespace's pods with the
// namespace's node selector and default tolerations, as agentpods_test.go does.
const admissionPlugins = "PodNodeSelector,PodTolerationRestriction"

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
	// No connection may be rerouted: the collectors are reached by the names the operator builds.
	if err := os.Unsetenv(devdial.EnvVar); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The operator's webhooks are the ones OLM installs for its pod (olm_test.go), so envtest's configurations,
	// which would call this process, are left out; the controllers that feed the collector and agent pods run here
	// without webhooks, and olm_test.go stops them while the operator's pod runs. OLM's CRDs are there from the
	// start: removed at a test's end, they would wait for finalizers only OLM removes.
	cluster := realnode.ClusterOptions(1)
	cluster.APIServerFlags["enable-admission-plugins"] = admissionPlugins // beside the node's own flags
	env, err = testenv.Start(testenv.Options{WithoutWebhooks: true, ExtraCRDPaths: []string{olminstall.CRDs(olmDir)},
		Cluster:     cluster,
		Controllers: slices.Concat(gnmicControllers, agentraxControllers),
		Manager: func(o *manager.Options) {
			// Quick follow-up of collectors that restart (a deleted pod comes back empty).
			o.GNMIcPollInterval, o.GNMIcReconnectBackoff = time.Second, 200*time.Millisecond
			o.RegistryListening = func(addr string) { registryURL.Store("http://" + addr) }
			// A discovery that failed (the agent's Service not yet routed) is retried in seconds, not TTL/4.
			o.RegistryHealthInterval = 2 * time.Second
		}})
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
	useClusterDNS()
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

// buildImages builds the pause, netprobe, gNMIc stand-in and MCP agent binaries and writes their images into one archive.
func buildImages(ctx context.Context, dir string) (string, error) {
	root := testenv.RepoRoot()
	pause, probe, standin := filepath.Join(dir, "pause"), filepath.Join(dir, "netprobe"), filepath.Join(dir, "gnmic")
	agent := filepath.Join(dir, "mcpagent")
	for pkg, out := range map[string]string{"./internal/testenv/images/pause": pause, "./test/realnode/netprobe": probe,
		"./test/gnmicserver/cmd/gnmic-standin": standin, "./test/realnode/mcpagent": agent} {
		if err := images.GoBuild(ctx, root, pkg, out); err != nil {
			return "", err
		}
	}
	imgs := map[string]v1.Image{}
	for _, spec := range []images.Spec{images.PauseSpec(pause), images.StaticBinarySpec(netprobeRef, probe),
		images.GNMIcStandinSpec(images.GNMIcStandinRef, standin), images.StaticBinarySpec(mcpAgentRef, agent)} {
		img, err := images.Build(spec)
		if err != nil {
			return "", err
		}
		imgs[spec.Ref] = img
	}
	archive := filepath.Join(dir, "images.tar")
	return archive, images.WriteArchive(archive, imgs)
}
