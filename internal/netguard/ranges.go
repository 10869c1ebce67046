// Package netguard keeps operator-initiated HTTP requests to user-supplied URLs (ExternalAttributeSync HTTP
// sources) away from the cluster's own network: loopback, private and link-local ranges (cloud metadata at
// 169.254.169.254 included), in-cluster DNS names, and every other range of the IANA special-purpose address
// registries. It checks twice: at admission (the URL's host as written) and at dial time (the IP the name
// resolved to, on every connection, redirects included), because a public-looking name can resolve — or be
// re-pointed after admission — to a blocked address.
package netguard

import (
	"net/netip"
	"strings"
)

// blockedRange is one prefix and why it is refused.
type blockedRange struct {
	prefix netip.Prefix
	why    string
}

// blocked is the IANA IPv4 and IPv6 special-purpose address registries (all entries, including the ones the
// registry marks globally reachable: anycast relays and AS112 are no legitimate attribute sources either), plus
// multicast, the IPv4 reserved block and deprecated IPv6 site-local. IPv4-mapped addresses are unmapped before the
// lookup; the IPv6 ranges that embed an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible) are refused whole,
// because the embedded address can be anything.
var blocked = func() []blockedRange {
	entries := []struct{ cidr, why string }{
		{"0.0.0.0/8", "this-network"},
		{"10.0.0.0/8", "private (RFC 1918)"},
		{"100.64.0.0/10", "shared address space (CGNAT, RFC 6598)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local (cloud metadata)"},
		{"172.16.0.0/12", "private (RFC 1918)"},
		{"192.0.0.0/24", "IETF protocol assignments"},
		{"192.0.2.0/24", "documentation (TEST-NET-1)"},
		{"192.31.196.0/24", "AS112"},
		{"192.52.193.0/24", "AMT"},
		{"192.88.99.0/24", "6to4 relay anycast"},
		{"192.168.0.0/16", "private (RFC 1918)"},
		{"192.175.48.0/24", "AS112 direct delegation"},
		{"198.18.0.0/15", "benchmarking (RFC 2544)"},
		{"198.51.100.0/24", "documentation (TEST-NET-2)"},
		{"203.0.113.0/24", "documentation (TEST-NET-3)"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"},
		{"255.255.255.255/32", "broadcast"},

		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "IPv4-compatible (deprecated)"},
		{"64:ff9b::/96", "IPv4/IPv6 translation (NAT64)"},
		{"64:ff9b:1::/48", "local-use IPv4/IPv6 translation"},
		{"100::/64", "discard-only"},
		{"100:0:0:1::/64", "dummy prefix"},
		{"2001::/23", "IETF protocol assignments (Teredo, ORCHID, …)"},
		{"2001:db8::/32", "documentation"},
		{"2002::/16", "6to4"},
		{"2620:4f:8000::/48", "AS112 direct delegation"},
		{"3fff::/20", "documentation"},
		{"5f00::/16", "segment routing (SRv6) SIDs"},
		{"fc00::/7", "unique local (ULA)"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local (deprecated)"},
		{"ff00::/8", "multicast"},
	}
	out := make([]blockedRange, len(entries))
	for i, e := range entries {
		out[i] = blockedRange{prefix: netip.MustParsePrefix(e.cidr), why: e.why}
	}
	return out
}()

// blockedReason says why ip is refused, or "" when it may be dialled. allow holds prefixes exempted by an
// explicit option (tests only).
func blockedReason(ip netip.Addr, allow []netip.Prefix) string {
	if !ip.IsValid() {
		return "invalid address"
	}
	ip = ip.Unmap().WithZone("")
	for _, p := range allow {
		if p.Contains(ip) {
			return ""
		}
	}
	for _, b := range blocked {
		if b.prefix.Contains(ip) {
			return b.why
		}
	}
	return ""
}

// blockedSuffixes are DNS names that resolve inside the cluster or the host: Kubernetes Services, mDNS and the
// loopback name. Matched on whole labels after lower-casing and dropping a trailing dot.
var blockedSuffixes = []string{"localhost", "local", "svc", "cluster.local", "internal", "localdomain", "home.arpa"}

// blockedName says why host (a DNS name, not an IP literal) is refused, or "".
func blockedName(host string) string {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "" {
		return "empty host name"
	}
	for _, s := range blockedSuffixes {
		if h == s || strings.HasSuffix(h, "."+s) {
			return "in-cluster or local name (*." + s + ")"
		}
	}
	if !strings.Contains(h, ".") {
		// A single label is completed by the resolver's search list (namespace.svc.cluster.local in a Pod).
		return "single-label name (resolved through the cluster's search domains)"
	}
	if numericHost(h) {
		// inet_aton accepts 127.1, 0x7f.0.0.1, 2130706433 and 0177.0.0.1; some resolvers pass them through.
		return "numeric host that is not a canonical IP address"
	}
	return ""
}

// numericHost reports whether every label is a decimal, octal or hex number, the shorthand IPv4 forms.
func numericHost(h string) bool {
	for _, label := range strings.Split(h, ".") {
		l := strings.TrimPrefix(strings.TrimPrefix(label, "0x"), "0X")
		if l == "" {
			if label == "" {
				return false
			}
			continue // a bare "0x" is still numeric for inet_aton
		}
		hex := strings.HasPrefix(label, "0x")
		for _, c := range l {
			digit := c >= '0' && c <= '9'
			hexLetter := hex && c >= 'a' && c <= 'f'
			if !digit && !hexLetter {
				return false
			}
		}
	}
	return true
}
