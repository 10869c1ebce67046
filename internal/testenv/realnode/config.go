package realnode

import (
	"fmt"
	"strings"
)

// containerdConfig is containerd's configuration (version 3) with everything under dir: its root, state and
// socket, the runc built from Go modules, the CNI plugins and configuration, and the offline pause image pinned as
// the sandbox (never pulled).
func containerdConfig(dir, assets, sandboxImage string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q

[plugins."io.containerd.cri.v1.runtime"]
  # The test process cannot lower oom_score_adj (no CAP_SYS_RESOURCE): without this every sandbox fails with
  # "nsexec: failed to update /proc/self/oom_score_adj: Permission denied".
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
`, dir+"/containerd/root", dir+"/containerd/state", containerdSocket(dir), dir+"/containerd/opt", sandboxImage,
		assets+"/runc", assets+"/cni", dir+"/cni/net.d")
}

func containerdSocket(dir string) string { return dir + "/containerd/containerd.sock" }

// cniConfig puts pods on the node's bridge: host-local addresses from the node's subnet, the bridge's address as
// gateway, no masquerading and no default route — a pod's only routes are its subnet and the Service range
// through the bridge, so nothing a pod sends can leave the machine.
func cniConfig(dir string, n *Node) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "quartet-realnode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q, "rangeStart": %q}]],
        "routes": [{"dst": %q}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, BridgeName, PodSubnet, n.IP, rangeStart, n.serviceCIDR, dir+"/cni/ipam")
}

// kubeletConfig is a KubeletConfiguration for a node that shares this machine with everything else: cgroupfs on
// cgroup v1, no swap, eviction or node-allocatable enforcement (the machine is not the node's to manage), image GC
// off (the images are imported, never pulled back), and the taint only pods that ask for the real node tolerate.
func kubeletConfig(dir string, n *Node, port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
address: %[2]s
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]d
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[5]q}
authorization:
  mode: AlwaysAllow
resolvConf: ""
clusterDomain: %[7]s
# Node-local DNS: CoreDNS listens on the node's own address (no kube-dns Service in front of it).
clusterDNS: [%[2]s]
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
registerWithTaints:
- {key: %[6]q, value: "true", effect: NoSchedule}
`, containerdSocket(dir), n.IP, port, healthzPort, dir+"/kubelet/client-ca.crt", Taint, ClusterDomain)
}

// kubeProxyConfig routes Services with nftables; NodePorts only on the bridge address, conntrack left as the
// machine has it.
func kubeProxyConfig(kubeconfig string, n *Node, healthz, metrics int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
clusterCIDR: %q
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
nodePortAddresses: [%q]
conntrack:
  maxPerCore: 0
  min: 0
`, kubeconfig, n.Name, PodSubnet, healthz, metrics, n.IP+"/32")
}

// containmentRules drop forwarded traffic that enters or leaves the bridge through any other interface: the
// kubelet turns ip_forward on, and pods must reach nothing beyond this machine's bridge.
func containmentRules() string {
	return strings.NewReplacer("$T", containmentTable, "$B", BridgeName).Replace(`table inet $T {
  chain forward {
    type filter hook forward priority -10; policy accept;
    iifname "$B" oifname != "$B" drop
    oifname "$B" iifname != "$B" drop
  }
}
`)
}
