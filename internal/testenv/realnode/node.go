// Package realnode runs a real Kubernetes node beside the simulated (kwok) ones of testenv's cluster: containerd and
// runc run the pods, the CNI bridge gives them addresses in network namespaces on this machine only, kube-proxy
// (nftables) routes Services and kube-router's firewall enforces NetworkPolicies; pods reach the API server through
// the `kubernetes` Service, as in any cluster, and resolve cluster names with CoreDNS listening on the node's
// address. The node is tainted, so only pods that tolerate Taint land there. Stop tears everything down and checks
// the machine is as it was.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/images"
)

// Facts of the real node tests rely on.
const (
	// BridgeName is the node's pod bridge.
	BridgeName = "quartet0"
	// PodSubnet is where the node's pods get addresses; it overlaps neither kwok's PodCIDR nor the Service range.
	PodSubnet = "10.245.0.0/24"
	// GatewayIP is the bridge's address, which is also the node's InternalIP.
	GatewayIP = "10.245.0.1"
	// Taint keeps every pod that does not tolerate it off the real node.
	Taint = "quartet.dev/real-node"
	// NodeLabel marks the real node (value "true"), for nodeSelectors.
	NodeLabel = "quartet.dev/real-node"

	rangeStart       = "10.245.0.10"
	containmentTable = "quartet-realnode"
)

// ClusterOptions are the testenv cluster options a real node needs, with Nodes simulated nodes beside it: the API
// server advertises GatewayIP, where Start forwards to its loopback port, so pods reach it through the
// `kubernetes` Service and verify its certificate with their service-account token's ca.crt.
func ClusterOptions(nodes int) *testenv.ClusterOptions {
	// The API server reaches the kubelet (pods/log, exec) at the node's InternalIP, on the bridge, rather than by
	// its host name, which resolves nowhere.
	return &testenv.ClusterOptions{Nodes: nodes, AdvertiseAddress: GatewayIP,
		APIServerFlags: map[string]string{"kubelet-preferred-address-types": "InternalIP"}}
}

// Options configure the node.
type Options struct {
	// Name is the Node's name (default "realnode-0").
	Name string
	// ImageArchives are docker-archive tarballs (images.WriteArchive) imported into containerd before the kubelet
	// starts; one of them must hold images.PauseRef.
	ImageArchives []string
	// ReadyTimeout bounds the wait for the Node to turn Ready (default 2 minutes).
	ReadyTimeout time.Duration
}

// Node is a running real node.
type Node struct {
	// Name is the Node object's name; IP its InternalIP (the bridge's address).
	Name, IP string
	// Dir holds the node's configuration, state and its programs' logs.
	Dir string

	env         *testenv.Env
	serviceCIDR string
	assets      string
	host        *hostState
	processes   []*testenv.Process // in start order
	bridgeMade  bool
	apiServer   *apiForwarder
	dnsGranted  bool
}

// Start brings the node up against env (a testenv cluster started with ClusterOptions) and waits until it is Ready.
// On failure everything it set up is torn down again.
func Start(ctx context.Context, env *testenv.Env, opts Options) (n *Node, err error) {
	if env.Cluster == nil {
		return nil, errors.New("realnode: the control plane must be a testenv cluster (Options.Cluster)")
	}
	if got := env.Cluster.AdvertiseAddress(); got != GatewayIP {
		return nil, fmt.Errorf("realnode: the cluster's API server advertises %q, not the node's %s (start it with realnode.ClusterOptions)", got, GatewayIP)
	}
	if err := Preflight(); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		opts.Name = "realnode-0"
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 2 * time.Minute
	}
	dir, err := os.MkdirTemp("", "quartet-realnode-")
	if err != nil {
		return nil, err
	}
	n = &Node{Name: opts.Name, IP: GatewayIP, Dir: dir, env: env, serviceCIDR: testenv.ServiceCIDR, assets: AssetsDir()}
	if n.host, err = recordHost(ctx); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop(context.WithoutCancel(ctx)))
		}
	}()
	if err := n.setUpNetwork(ctx); err != nil {
		return n, err
	}
	// The API server's webhook and service-proxy connections reach the node's pods as in a real cluster.
	if err := env.Cluster.Router.PassThrough(PodSubnet); err != nil {
		return n, err
	}
	if n.apiServer, err = forwardAPIServer(n.IP, env.Config.Host); err != nil {
		return n, err
	}
	if err := n.startDNS(ctx); err != nil {
		return n, err
	}
	if err := n.startContainerd(ctx, opts.ImageArchives); err != nil {
		return n, err
	}
	if err := n.startNodeAgents(); err != nil {
		return n, err
	}
	if err := n.waitReady(ctx, opts.ReadyTimeout); err != nil {
		return n, err
	}
	// kube-router identifies its node by the Node object, so it starts once the kubelet has registered it.
	return n, n.startFirewall(ctx)
}

// setUpNetwork makes the bridge with the node's address, routes the Service range onto it (so a ClusterIP that
// kube-proxy has not translated stays on the bridge instead of taking the default route), and loads the
// containment rules.
func (n *Node) setUpNetwork(ctx context.Context) error {
	if _, err := run(ctx, "ip", "link", "add", BridgeName, "type", "bridge"); err != nil {
		return err
	}
	n.bridgeMade = true
	for _, args := range [][]string{
		{"addr", "add", n.IP + "/24", "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
		{"route", "add", n.serviceCIDR, "dev", BridgeName},
	} {
		if _, err := run(ctx, "ip", args...); err != nil {
			return err
		}
	}
	return nftLoad(ctx, containmentRules())
}

func (n *Node) write(rel, content string) (string, error) {
	p := filepath.Join(n.Dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, []byte(content), 0o600)
}

func (n *Node) run(name string, binary string, args ...string) error {
	// containerd finds its shim on PATH.
	env := []string{"PATH=" + n.assets + ":" + os.Getenv("PATH")}
	p, err := n.env.Cluster.Run("realnode-"+name, env, binary, args...)
	if err != nil {
		return err
	}
	n.processes = append(n.processes, p)
	return nil
}

func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	return run(ctx, filepath.Join(n.assets, "ctr"), append([]string{"--address", containerdSocket(n.Dir), "--namespace", "k8s.io"}, args...)...)
}

func (n *Node) startContainerd(ctx context.Context, archives []string) error {
	if _, err := n.write("cni/net.d/10-quartet.conflist", cniConfig(n.Dir, n)); err != nil {
		return err
	}
	cfg, err := n.write("containerd/config.toml", containerdConfig(n.Dir, n.assets, images.PauseRef))
	if err != nil {
		return err
	}
	if err := n.run("containerd", filepath.Join(n.assets, "containerd"), "--config", cfg); err != nil {
		return err
	}
	var last error
	if err := n.poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, last = n.ctr(ctx, "version")
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("containerd did not answer within a minute: %w", errors.Join(err, last))
	}
	if err := n.ImportImages(ctx, archives...); err != nil {
		return err
	}
	out, err := n.ctr(ctx, "images", "list", "-q")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(out), images.PauseRef) {
		return fmt.Errorf("the sandbox image %s is not among the imported images (%s)", images.PauseRef, strings.Join(strings.Fields(out), ", "))
	}
	return nil
}

// ImportImages loads docker-archive tarballs (images.WriteArchive) into the running node's containerd, for images
// built after the node started; a pod whose image is there starts without a pull.
func (n *Node) ImportImages(ctx context.Context, archives ...string) error {
	for _, archive := range archives {
		if _, err := n.ctr(ctx, "images", "import", archive); err != nil {
			return err
		}
	}
	return nil
}

func freePorts(count int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range count {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (n *Node) kubeconfig(user string) (string, error) {
	data, err := n.env.AddAdminKubeconfig(user)
	if err != nil {
		return "", err
	}
	return n.write(strings.ReplaceAll(user, ":", "-")+".kubeconfig", string(data))
}

// startNodeAgents starts the kubelet, kube-proxy and kube-router's firewall.
func (n *Node) startNodeAgents() error {
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	// The kubelet trusts the clients of the control plane's CA and the API server's own client certificate for
	// kubelets (pods/log, exec, port-forward).
	apiServerClientCA, err := os.ReadFile(n.env.Cluster.KubeletClientCA())
	if err != nil {
		return err
	}
	if _, err := n.write("kubelet/client-ca.crt", string(n.env.Config.CAData)+"\n"+string(apiServerClientCA)); err != nil {
		return err
	}
	kubeletCfg, err := n.write("kubelet/config.yaml", kubeletConfig(n.Dir, n, ports[0], ports[1]))
	if err != nil {
		return err
	}
	kubeletKubeconfig, err := n.kubeconfig("system:node:" + n.Name)
	if err != nil {
		return err
	}
	if err := n.run("kubelet", filepath.Join(n.assets, "kubelet"),
		"--config="+kubeletCfg, "--kubeconfig="+kubeletKubeconfig, "--root-dir="+filepath.Join(n.Dir, "kubelet", "root"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"), "--hostname-override="+n.Name, "--node-ip="+n.IP,
		"--node-labels="+NodeLabel+"=true", "--v=2"); err != nil {
		return err
	}
	proxyKubeconfig, err := n.kubeconfig("system:kube-proxy")
	if err != nil {
		return err
	}
	proxyCfg, err := n.write("kube-proxy/config.yaml", kubeProxyConfig(proxyKubeconfig, n, ports[2], ports[3]))
	if err != nil {
		return err
	}
	return n.run("kube-proxy", filepath.Join(n.assets, "kube-proxy"), "--config="+proxyCfg, "--v=2")
}

// startFirewall starts kube-router's NetworkPolicy firewall and waits (a minute at most) until it has hooked its
// chain into the filter table's FORWARD chain.
func (n *Node) startFirewall(ctx context.Context) error {
	routerKubeconfig, err := n.kubeconfig("kube-router")
	if err != nil {
		return err
	}
	if err := n.run("kube-router", filepath.Join(n.assets, "kube-router"),
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
		"--hostname-override="+n.Name, "--kubeconfig="+routerKubeconfig, "--health-port=0", "--metrics-port=0",
		"--service-cluster-ip-range="+n.serviceCIDR, "--iptables-sync-period=5s", "--v=1"); err != nil {
		return err
	}
	var last error
	if err := n.poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		_, last = run(ctx, "iptables", "-S", "KUBE-ROUTER-FORWARD")
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("kube-router's firewall did not set up its chains within a minute: %w", errors.Join(err, last))
	}
	return nil
}

// poll runs check until it is done, the timeout passes, or one of the node's programs exits (which fails at once,
// naming its log).
func (n *Node) poll(ctx context.Context, timeout time.Duration, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, p := range n.processes {
			if err := p.Exited(); err != nil {
				return false, err
			}
		}
		return check(ctx)
	})
}

func (n *Node) waitReady(ctx context.Context, timeout time.Duration) error {
	last := "not registered"
	err := n.poll(ctx, timeout, func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if err := n.env.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready within %s: %s (logs in %s): %w", n.Name, timeout, last, n.env.Cluster.LogDir(), err)
	}
	return nil
}

// Stop deletes the node's pods (so the kubelet stops their sandboxes and the CNI plugin releases their addresses),
// stops kube-router, kube-proxy, the kubelet, containerd and CoreDNS, closes the API server's forwarder, revokes
// CoreDNS's role, kills any shim left, unmounts what is left under the
// node's directory, restores the machine's settings, tables and sets, and reports anything that was left behind.
func (n *Node) Stop(ctx context.Context) error {
	var errs []error
	if len(n.processes) > 0 {
		errs = append(errs, n.drain(ctx))
	}
	for i := len(n.processes) - 1; i >= 0; i-- {
		errs = append(errs, n.processes[i].Stop())
	}
	n.processes = nil
	if n.apiServer != nil {
		errs = append(errs, n.apiServer.stop())
		n.apiServer = nil
	}
	if n.dnsGranted {
		errs = append(errs, n.revokeDNS(ctx))
		n.dnsGranted = false
	}

	errs = append(errs, killShims(n.Dir), unmountUnder(n.Dir))
	if n.bridgeMade {
		if _, err := run(ctx, "ip", "link", "delete", BridgeName); err != nil {
			errs = append(errs, err)
		}
	}
	if n.host != nil {
		errs = append(errs, n.host.restore(ctx), n.host.leftovers(ctx))
	}
	if os.Getenv("QUARTET_TEST_KEEP_LOGS") == "" {
		errs = append(errs, os.RemoveAll(n.Dir))
	}
	return errors.Join(errs...)
}

// drain deletes every pod bound to the node and waits (a minute at most) until the kubelet has confirmed each.
func (n *Node) drain(ctx context.Context) error {
	list := func(ctx context.Context) ([]corev1.Pod, error) {
		var pods corev1.PodList
		err := n.env.Client.List(ctx, &pods, client.MatchingFields{"spec.nodeName": n.Name})
		return pods.Items, err
	}
	pods, err := list(ctx)
	if err != nil {
		return err
	}
	for i := range pods {
		if err := n.env.Client.Delete(ctx, &pods[i], client.GracePeriodSeconds(1)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	var left int
	err = n.poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := list(ctx)
		left = len(pods)
		return err == nil && left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("draining %s: %d pods left: %w", n.Name, left, err)
	}
	return nil
}

// killShims kills containerd's runc shims that serve this node's containerd (they outlive it by design).
func killShims(dir string) error {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var errs []error
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cmdline), "containerd-shim") || !strings.Contains(string(cmdline), dir) {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err == nil {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("killing shim %d: %w", pid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount below dir, deepest first (overlay root filesystems, shm, the kubelet's volume
// tmpfs mounts that a failed teardown left).
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mounts[i], err))
		}
	}
	return errors.Join(errs...)
}
