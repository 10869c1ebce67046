package netguard

import (
	"errors"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCheckHost(t *testing.T) {
	cases := []struct {
		host    string
		blocked bool
	}{
		// Public addresses and names pass.
		{"93.184.215.14", false},
		{"8.8.8.8", false},
		{"2606:4700:4700::1111", false},
		{"[2606:4700:4700::1111]", false},
		{"attributes.example.com", false},
		{"cmdb.corp.example.org.", false},
		{"100.63.255.255", false},  // just below CGNAT
		{"100.128.0.0", false},     // just above CGNAT
		{"198.17.255.255", false},  // just below benchmarking
		{"198.20.0.0", false},      // just above benchmarking
		{"172.32.0.1", false},      // just above 172.16/12
		{"223.255.255.255", false}, // just below multicast
		{"1.example.com", false},   // a numeric first label alone is fine

		// Loopback, private, link-local, metadata.
		{"127.0.0.1", true},
		{"127.255.255.254", true},
		{"10.0.0.1", true},
		{"172.16.0.1", true},
		{"172.31.255.255", true},
		{"192.168.1.1", true},
		{"169.254.169.254", true},
		{"169.254.0.1", true},
		// The rest of the IANA registry.
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		{"192.0.0.8", true},
		{"192.0.0.170", true},
		{"192.0.2.10", true},
		{"192.31.196.1", true},
		{"192.52.193.1", true},
		{"192.88.99.1", true},
		{"192.175.48.1", true},
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		{"198.51.100.1", true},
		{"203.0.113.1", true},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		// IPv6.
		{"::1", true},
		{"[::1]", true},
		{"::", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:7f00:1", true},
		{"::ffff:169.254.169.254", true},
		{"::ffff:a9fe:a9fe", true},
		{"::127.0.0.1", true},
		{"64:ff9b::a9fe:a9fe", true},
		{"64:ff9b:1::1", true},
		{"100::1", true},
		{"2001::1", true},
		{"2001:db8::1", true},
		{"2002:7f00:1::", true},
		{"2620:4f:8000::1", true},
		{"3fff::1", true},
		{"5f00::1", true},
		{"fc00::1", true},
		{"fd12:3456::1", true},
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fec0::1", true},
		{"ff02::1", true},
		// Names.
		{"localhost", true},
		{"LOCALHOST.", true},
		{"api.localhost", true},
		{"printer.local", true},
		{"kubernetes.default.svc", true},
		{"db.prod.svc.cluster.local", true},
		{"db.prod.svc.cluster.local.", true},
		{"metadata.google.internal", true},
		{"router.home.arpa", true},
		{"kubernetes", true},
		{"", true},
		// inet_aton shorthands of 127.0.0.1.
		{"127.1", true},
		{"2130706433", true},
		{"0x7f.0.0.1", true},
		{"0177.0.0.1", true},
		{"0x7f000001", true},
	}
	g := New()
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			err := g.CheckHost(tc.host)
			if tc.blocked {
				NewWithT(t).Expect(errors.Is(err, ErrBlocked)).To(BeTrue(), "want blocked, got %v", err)
			} else {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	cases := []struct {
		url     string
		wantErr string
	}{
		{"https://cmdb.example.com/api/collectors", ""},
		{"http://cmdb.example.com/x", ""},
		{"file:///etc/passwd", "scheme"},
		{"gopher://cmdb.example.com/", "scheme"},
		{"https://user:pw@cmdb.example.com/", "credentials"},
		{"https:///path", "no host"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://[::ffff:169.254.169.254]/", "link-local"},
		{"http://[fd00::1]:8080/", "unique local"},
		{"https://api.default.svc:443/", "in-cluster"},
		{"http://localhost:8080/", "in-cluster or local"},
		{"://bad", "not a URL"},
	}
	g := New()
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			_, err := g.CheckURL(tc.url)
			if tc.wantErr == "" {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
			} else {
				NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			}
		})
	}
}

func TestControl(t *testing.T) {
	cases := []struct {
		name, network, address string
		allow                  []netip.Prefix
		blocked                bool
	}{
		{"public v4", "tcp4", "93.184.215.14:443", nil, false},
		{"public v6", "tcp6", "[2606:4700:4700::1111]:443", nil, false},
		{"loopback by default", "tcp", "127.0.0.1:8080", nil, true},
		{"loopback v6 by default", "tcp6", "[::1]:8080", nil, true},
		{"mapped loopback", "tcp6", "[::ffff:127.0.0.1]:80", nil, true},
		{"metadata", "tcp4", "169.254.169.254:80", nil, true},
		{"metadata even with loopback allowed", "tcp4", "169.254.169.254:80", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, true},
		{"loopback allowed for tests", "tcp4", "127.0.0.1:8080", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, false},
		{"other loopback not allowed", "tcp4", "127.0.0.2:8080", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, true},
		{"udp refused", "udp", "93.184.215.14:53", nil, true},
		{"unix refused", "unix", "/var/run/x.sock", nil, true},
		{"unparsable", "tcp", "example.com:80", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := New(AllowPrefixesForTesting(tc.allow...)).Control(tc.network, tc.address, nil)
			if tc.blocked {
				NewWithT(t).Expect(errors.Is(err, ErrBlocked)).To(BeTrue(), "want blocked, got %v", err)
			} else {
				NewWithT(t).Expect(err).NotTo(HaveOccurred())
			}
		})
	}
}

// FuzzCheckHost: no panic; an accepted IP literal is in no blocked range; an IPv4 address and its IPv4-mapped
// IPv6 form always get the same verdict.
func FuzzCheckHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:10.0.0.1", "example.com", "a.svc", "[::1]", "0x7f.1", "fe80::1%lo", "8.8.8.8"} {
		f.Add(s)
	}
	g := New()
	f.Fuzz(func(t *testing.T, host string) {
		err := g.CheckHost(host)
		ip, perr := netip.ParseAddr(host)
		if perr != nil {
			return
		}
		if err == nil {
			for _, b := range blocked {
				if b.prefix.Contains(ip.Unmap().WithZone("")) {
					t.Fatalf("%s accepted but in %s", host, b.prefix)
				}
			}
		}
		if ip.Is4() {
			mapped := netip.AddrFrom16(ip.As16()).String()
			if (g.CheckHost(mapped) == nil) != (err == nil) {
				t.Fatalf("%s and %s disagree", host, mapped)
			}
		}
	})
}

// TestCheckAllowedPrefix: administrators may exempt private ranges, never loopback, link-local (metadata) or
// this-network, and only canonical prefixes.
func TestCheckAllowedPrefix(t *testing.T) {
	for cidr, want := range map[string]string{
		"10.20.0.0/16":        "",
		"192.168.1.0/24":      "",
		"fd00:1::/64":         "",
		"10.20.0.1/16":        "not a network prefix",
		"127.0.0.1/32":        "loopback",
		"169.254.0.0/16":      "cloud metadata",
		"0.0.0.0/0":           "this-network",
		"::/0":                "unspecified or loopback",
		"fe80::/64":           "link-local",
		"::ffff:10.0.0.0/104": "IPv4 form",
	} {
		t.Run(cidr, func(t *testing.T) {
			g := NewWithT(t)
			err := CheckAllowedPrefix(netip.MustParsePrefix(cidr))
			if want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(want)))
		})
	}
}

// TestAdministratorExemption: an exempted private range is dialled; its neighbours stay blocked.
func TestAdministratorExemption(t *testing.T) {
	g := NewWithT(t)
	guard := New(AllowPrefixes(netip.MustParsePrefix("10.20.0.0/16")))
	g.Expect(guard.CheckHost("10.20.3.4")).To(Succeed())
	g.Expect(guard.CheckHost("10.21.3.4")).To(MatchError(ContainSubstring("private (RFC 1918)")))
	g.Expect(guard.Control("tcp", "10.20.3.4:5432", nil)).To(Succeed())
	g.Expect(guard.Control("tcp", "169.254.169.254:80", nil)).To(MatchError(ErrBlocked))
}

// TestParseAllowedPrefixes: an allow-CIDR flag takes private prefixes and refuses loopback, link-local and
// prefixes that are not in canonical form, naming the entry.
func TestParseAllowedPrefixes(t *testing.T) {
	g := NewWithT(t)
	got, err := ParseAllowedPrefixes("10.20.0.0/16, fd00:1::/64,")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal([]netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:1::/64")}))
	none, err := ParseAllowedPrefixes("")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(none).To(BeEmpty())
	for _, bad := range []string{"127.0.0.0/8", "169.254.169.254/32", "10.0.0.1/8", "nonsense"} {
		_, err := ParseAllowedPrefixes("10.20.0.0/16," + bad)
		g.Expect(err).To(MatchError(ContainSubstring("%q", bad)), bad)
	}
}
