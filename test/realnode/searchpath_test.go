package realnode

import (
	"context"
	"net"
	"strings"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/quartet-dev/quartet-operator/internal/testenv/realnode"
)

// useClusterDNS makes this process resolve names as a pod on the node does: every lookup the Go resolver makes
// (the operator's connections to its collectors and agents included) goes to the cluster DNS server, so
// <pod>.<service>.<namespace>.svc.cluster.local names resolve to pod addresses on the node's bridge, and
// <service>.<namespace>.svc names (the agents' MCP endpoints) resolve as a pod's search path makes them: a pod's
// resolv.conf lists cluster.local among its search domains, but the Go resolver takes search domains from this
// machine's /etc/resolv.conf alone, so that one entry is applied to the question on its way to the server
// (searchConn). Names in /etc/hosts (localhost) still resolve from there, and the API server is reached by IP.
func useClusterDNS() {
	server := net.JoinHostPort(realnode.GatewayIP, "53")
	net.DefaultResolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, server)
		if udp, ok := conn.(*net.UDPConn); ok && err == nil {
			return &searchConn{UDPConn: udp}, nil
		}
		return conn, err
	}}
}

// serviceSuffix ends the names the search path completes: <service>.<namespace>.svc.
const serviceSuffix = ".svc."

// searchConn is one UDP exchange with the cluster DNS (the Go resolver dials one per question) in which a
// question for <service>.<namespace>.svc is asked as <service>.<namespace>.svc.cluster.local, and the answer is
// given back under the name asked, as the resolver checks. It stays a net.PacketConn, so the resolver frames
// its messages as datagrams. Truncated answers make the resolver retry over TCP, which is left as it is: no
// Service record is that large.
type searchConn struct {
	*net.UDPConn
	asked, sent dnsmessage.Name
}

// Write sends the query, completed by the search path when it asks for a Service name.
func (c *searchConn) Write(b []byte) (int, error) {
	var m dnsmessage.Message
	if err := m.Unpack(b); err != nil || len(m.Questions) != 1 || !strings.HasSuffix(m.Questions[0].Name.String(), serviceSuffix) {
		return c.UDPConn.Write(b)
	}
	sent, err := dnsmessage.NewName(m.Questions[0].Name.String() + realnode.ClusterDomain + ".")
	if err != nil {
		return c.UDPConn.Write(b)
	}
	c.asked, c.sent = m.Questions[0].Name, sent
	m.Questions[0].Name = sent
	packed, err := m.Pack()
	if err != nil {
		return 0, err
	}
	if _, err := c.UDPConn.Write(packed); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Read receives the answer and, when the query was completed, names it back as asked.
func (c *searchConn) Read(b []byte) (int, error) {
	n, err := c.UDPConn.Read(b)
	if err != nil || c.sent.Length == 0 {
		return n, err
	}
	var m dnsmessage.Message
	if err := m.Unpack(b[:n]); err != nil {
		return n, nil // the resolver reports the malformed answer itself
	}
	for i := range m.Questions {
		if m.Questions[i].Name == c.sent {
			m.Questions[i].Name = c.asked
		}
	}
	for _, section := range [][]dnsmessage.Resource{m.Answers, m.Authorities, m.Additionals} {
		for i := range section {
			if section[i].Header.Name == c.sent {
				section[i].Header.Name = c.asked
			}
		}
	}
	packed, err := m.Pack()
	if err != nil {
		return 0, err
	}
	return copy(b, packed), nil
}
