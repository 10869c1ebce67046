package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// hostSysctls are the kernel settings the kubelet, kube-proxy or kube-router may change; each is put back at
// teardown (those this kernel lacks are skipped).
var hostSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// hostState is what the node may change on this machine, recorded before it starts: teardown restores the
// settings and removes every table, set, network namespace, link and cgroup that was not there before.
type hostState struct {
	sysctls   map[string]string
	nftTables map[string]string // "family name" → the table's ruleset, to put back a table that existed
	ipsets    []string
	netns     []string
	links     []string
	cgroups   []string // kubepods hierarchies that already existed (then left alone)
}

func run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func nftTableNames(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "nft", "list", "tables")
	if err != nil {
		return nil, err
	}
	var tables []string
	for _, line := range strings.Split(out, "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, t)
		}
	}
	return tables, nil
}

func ipsetNames(ctx context.Context) ([]string, error) {
	out, err := run(ctx, "ipset", "list", "-n")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// netnsNames lists the network namespaces containerd names for pods (cni-<id>): other programs' namespaces on
// this machine are none of the node's business.
func netnsNames() []string {
	entries, _ := os.ReadDir("/var/run/netns")
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cni-") {
			names = append(names, e.Name())
		}
	}
	return names
}

// linkNames lists the links the node can make: its bridge and the veths the bridge plugin names veth*.
func linkNames() []string {
	entries, _ := os.ReadDir("/sys/class/net")
	var names []string
	for _, e := range entries {
		if e.Name() == BridgeName || strings.HasPrefix(e.Name(), "veth") {
			names = append(names, e.Name())
		}
	}
	return names
}

// nodeTable reports whether an nft table is one the node's programs write: kube-proxy's, the containment table, and
// the iptables-nft tables kube-router and the kubelet program.
func nodeTable(t string) bool {
	family, name, _ := strings.Cut(t, " ")
	if family != "ip" && family != "ip6" && family != "inet" {
		return false
	}
	return slices.Contains([]string{"kube-proxy", containmentTable, "filter", "nat", "mangle", "raw", "security"}, name)
}

// kubepodsCgroups are the cgroup hierarchies the node makes: the kubelet's kubepods and containerd's k8s.io (cgroup
// v1: one per controller; v2: one).
func kubepodsCgroups() []string {
	var found []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods", "/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/*/k8s.io", "/sys/fs/cgroup/k8s.io"} {
		matches, _ := filepath.Glob(pattern)
		found = append(found, matches...)
	}
	return found
}

func recordHost(ctx context.Context) (*hostState, error) {
	h := &hostState{sysctls: map[string]string{}, nftTables: map[string]string{}}
	for _, s := range hostSysctls {
		if v, err := os.ReadFile("/proc/sys/" + s); err == nil {
			h.sysctls[s] = strings.TrimSpace(string(v))
		}
	}
	tables, err := nftTableNames(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		family, name, _ := strings.Cut(t, " ")
		rules, err := run(ctx, "nft", "list", "table", family, name)
		if err != nil {
			return nil, err
		}
		h.nftTables[t] = rules
	}
	if h.ipsets, err = ipsetNames(ctx); err != nil {
		return nil, err
	}
	h.netns, h.links, h.cgroups = netnsNames(), linkNames(), kubepodsCgroups()
	return h, nil
}

// restore puts the machine back as recorded and returns what it could not clean, or what it found changed and had
// to put back (the test then knows the node left state behind that its own teardown steps did not remove).
func (h *hostState) restore(ctx context.Context) error {
	var errs []error
	// Network namespaces made for pods the kubelet did not stop (their veths go with them).
	for _, ns := range netnsNames() {
		if !slices.Contains(h.netns, ns) {
			if _, err := run(ctx, "ip", "netns", "delete", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, link := range linkNames() {
		if !slices.Contains(h.links, link) {
			if _, err := run(ctx, "ip", "link", "delete", link); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// nftables first (iptables-nft chains live in nft tables and reference the ipsets), then the sets.
	tables, err := nftTableNames(ctx)
	errs = append(errs, err)
	for _, t := range tables {
		if !nodeTable(t) {
			continue
		}
		family, name, _ := strings.Cut(t, " ")
		if _, err := run(ctx, "nft", "delete", "table", family, name); err != nil {
			errs = append(errs, err)
			continue
		}
		if before, existed := h.nftTables[t]; existed {
			if err := nftLoad(ctx, before); err != nil {
				errs = append(errs, fmt.Errorf("restoring nft table %s: %w", t, err))
			}
		}
	}
	sets, err := ipsetNames(ctx)
	errs = append(errs, err)
	for _, s := range sets {
		if !slices.Contains(h.ipsets, s) {
			if _, err := run(ctx, "ipset", "destroy", s); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, cg := range kubepodsCgroups() {
		if !slices.Contains(h.cgroups, cg) {
			if err := removeCgroupTree(cg); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for s, v := range h.sysctls {
		if err := os.WriteFile("/proc/sys/"+s, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", s, v, err))
		}
	}
	return errors.Join(errs...)
}

func nftLoad(ctx context.Context, ruleset string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f: %w: %s", err, out)
	}
	return nil
}

// removeCgroupTree removes a cgroup and its children, deepest first (a cgroup directory is removed with rmdir once
// it holds no process).
func removeCgroupTree(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// leftovers compares the machine with the record after restore: anything still different is reported.
func (h *hostState) leftovers(ctx context.Context) error {
	var problems []string
	for s, v := range h.sysctls {
		now, _ := os.ReadFile("/proc/sys/" + s)
		if strings.TrimSpace(string(now)) != v {
			problems = append(problems, fmt.Sprintf("sysctl %s is %s, was %s", s, strings.TrimSpace(string(now)), v))
		}
	}
	tables, err := nftTableNames(ctx)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, t := range tables {
		if _, ok := h.nftTables[t]; !ok && nodeTable(t) {
			problems = append(problems, "nft table "+t)
		}
	}
	sets, err := ipsetNames(ctx)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, s := range sets {
		if !slices.Contains(h.ipsets, s) {
			problems = append(problems, "ipset "+s)
		}
	}
	for _, ns := range netnsNames() {
		if !slices.Contains(h.netns, ns) {
			problems = append(problems, "network namespace "+ns)
		}
	}
	for _, l := range linkNames() {
		if !slices.Contains(h.links, l) {
			problems = append(problems, "link "+l)
		}
	}
	for _, cg := range kubepodsCgroups() {
		if !slices.Contains(h.cgroups, cg) {
			problems = append(problems, "cgroup "+cg)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("the real node left behind: %s", strings.Join(problems, "; "))
	}
	return nil
}
