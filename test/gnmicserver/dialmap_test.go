package gnmicserver

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
)

func TestDialMapEntries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		restPort int32
		local    []string
		want     string
	}{
		{"none", 0, nil, ""},
		{"default port, URL and address", 0, []string{"http://127.0.0.1:41234", "127.0.0.1:41235"},
			"gnmic-core-0.gnmic-core.default.svc.cluster.local:7890=127.0.0.1:41234," +
				"gnmic-core-1.gnmic-core.default.svc.cluster.local:7890=127.0.0.1:41235"},
		{"REST port of the Cluster", 9000, []string{"http://[::1]:1"},
			"gnmic-core-0.gnmic-core.default.svc.cluster.local:9000=[::1]:1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(DialMapEntries("default", "core", tc.restPort, tc.local)).To(Equal(tc.want))
		})
	}
}

// The entries send the address the operator builds for each pod (Cluster.CollectorPodAddress) to its server.
func TestServerDialMapEntriesMatchTheOperatorsAddresses(t *testing.T) {
	g := NewWithT(t)
	var servers []*Server
	for range 2 {
		s, err := Start("127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = s.Close() })
		servers = append(servers, s)
	}
	m, err := devdial.Parse(ServerDialMapEntries("team-a", "edge", 0, servers))
	g.Expect(err).NotTo(HaveOccurred())
	c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "edge"}}
	for i, s := range servers {
		to, ok := m.Lookup(c.CollectorPodAddress(i, ""))
		g.Expect(ok).To(BeTrue())
		g.Expect(to).To(Equal(s.Addr()))
	}
	_, ok := m.Lookup(c.CollectorPodAddress(2, ""))
	g.Expect(ok).To(BeFalse(), "a pod without a server is not mapped")
}
