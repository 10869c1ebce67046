package gnmicserver

import (
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// Addr is the server's listen address, e.g. 127.0.0.1:41234.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// DialMapEntries returns the QUARTET_DEV_DIAL_MAP entries (internal/devdial) that send the operator's connections
// to the collector pods of gNMIc Cluster namespace/name to local stand-ins: pod i's REST address (as the operator
// builds it, in the default cluster domain) to local[i]. len(local) is the number of pods covered; restPort is the
// Cluster's spec.api.restPort (0 means the default). A local entry is a base URL (http://127.0.0.1:41234, what
// URL returns) or an address (127.0.0.1:41234).
func DialMapEntries(namespace, name string, restPort int32, local []string) string {
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if restPort != 0 {
		c.Spec.API = &gnmicv1alpha1.ClusterAPI{RestPort: restPort}
	}
	entries := make([]string, len(local))
	for i, to := range local {
		if u, err := url.Parse(to); err == nil && u.Host != "" {
			to = u.Host
		}
		entries[i] = c.CollectorPodAddress(i, "") + "=" + to
	}
	return strings.Join(entries, ",")
}

// ServerDialMapEntries is DialMapEntries for servers: pod i is servers[i].
func ServerDialMapEntries(namespace, name string, restPort int32, servers []*Server) string {
	local := make([]string, len(servers))
	for i, s := range servers {
		local[i] = s.Addr()
	}
	return DialMapEntries(namespace, name, restPort, local)
}
