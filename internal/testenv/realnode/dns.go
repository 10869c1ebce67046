package realnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// Cluster DNS facts tests rely on.
const (
	// ClusterDomain is the cluster's DNS domain (the kubelet's clusterDomain).
	ClusterDomain = "cluster.local"
	// DNSUser is the identity CoreDNS uses towards the API server; DNSClusterRole (bound to it) lets it list and
	// watch what it answers from, and nothing else.
	DNSUser        = "quartet:realnode:coredns"
	DNSClusterRole = "quartet:realnode:coredns"
)

// dnsRules are what CoreDNS's kubernetes plugin reads with pod records disabled: Services, their EndpointSlices
// (headless records and endpoint hostnames) and Namespaces (a name in a missing namespace is NXDOMAIN).
var dnsRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
}

// corefile makes CoreDNS a node-local resolver: it listens on the node's address only (where the kubelet points
// every pod, clusterDNS), answers for the cluster domain and the reverse zone from the API server, and forwards
// nothing — there is no forward plugin, so any other name is refused, never looked up beyond this machine.
func corefile(ip, kubeconfig string) string {
	return fmt.Sprintf(`%[1]s:53 in-addr.arpa:53 {
    bind %[2]s
    errors
    log
    loadbalance
    cache 5
    kubernetes %[1]s in-addr.arpa {
        kubeconfig %[3]q
        pods disabled
        ttl 5
    }
}
`, ClusterDomain, ip, kubeconfig)
}

// startDNS grants CoreDNS its read-only role, starts it and waits (a minute at most) until it answers the
// `kubernetes` Service's name with its ClusterIP at the node's address.
func (n *Node) startDNS(ctx context.Context) error {
	n.dnsGranted = true
	if err := n.grantDNS(ctx); err != nil {
		return err
	}
	data, err := n.env.AddUserKubeconfig(DNSUser)
	if err != nil {
		return err
	}
	kubeconfig, err := n.write("coredns/kubeconfig", string(data))
	if err != nil {
		return err
	}
	conf, err := n.write("coredns/Corefile", corefile(n.IP, kubeconfig))
	if err != nil {
		return err
	}
	if err := n.run("coredns", filepath.Join(n.assets, "coredns"), "-conf", conf); err != nil {
		return err
	}
	name, want := "kubernetes.default.svc."+ClusterDomain+".", testenv.KubernetesServiceIP()
	var last error
	if err := n.poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		var addrs []string
		addrs, last = LookupAt(ctx, n.IP, name)
		return last == nil && slices.Equal(addrs, []string{want}), nil
	}); err != nil {
		return fmt.Errorf("CoreDNS did not answer %s with %s within a minute: %w", name, want, errors.Join(err, last))
	}
	return nil
}

// grantDNS creates DNSClusterRole and binds it to DNSUser.
func (n *Node) grantDNS(ctx context.Context) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: DNSClusterRole}, Rules: dnsRules}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: DNSClusterRole},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: DNSClusterRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: DNSUser}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := n.env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("granting CoreDNS its role: %w", err)
		}
	}
	return nil
}

// revokeDNS deletes CoreDNS's role and binding (the cluster may outlive the node, as in `make dev`).
func (n *Node) revokeDNS(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	for _, obj := range []client.Object{
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: DNSClusterRole}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: DNSClusterRole}},
	} {
		errs = append(errs, client.IgnoreNotFound(n.env.Client.Delete(ctx, obj)))
	}
	return errors.Join(errs...)
}

// LookupAt resolves name (fully qualified, with its final dot) with the DNS server at ip:53 alone, as a pod
// whose resolv.conf names only that server would, and returns the addresses sorted.
func LookupAt(ctx context.Context, ip, name string) ([]string, error) {
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(ip, "53"))
	}}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	addrs, err := resolver.LookupHost(ctx, name)
	slices.Sort(addrs)
	return addrs, err
}
