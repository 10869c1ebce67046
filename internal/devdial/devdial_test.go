package devdial

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     string // String() of the result
		err      string // substring of the error; it names the entry
	}{
		{name: "empty", in: "", want: ""},
		{name: "blanks and empty entries", in: " , ,", want: ""},
		{name: "exact", in: "gnmic-core-0.gnmic-core.default.svc.cluster.local:7890=127.0.0.1:41234",
			want: "gnmic-core-0.gnmic-core.default.svc.cluster.local:7890=127.0.0.1:41234"},
		{name: "exact keeping the port", in: "planner.team-a.svc:8080=127.0.0.1", want: "planner.team-a.svc:8080=127.0.0.1"},
		{name: "names are lower-cased, root dot dropped", in: "Planner.Team-A.svc.:8080=LocalHost:9",
			want: "planner.team-a.svc:8080=localhost:9"},
		{name: "exact sorted before patterns in order", in: "*.svc:*=127.0.0.1,b.svc:1=127.0.0.1:2,*:9090=127.0.0.2:19090,a.svc:1=127.0.0.1:3",
			want: "a.svc:1=127.0.0.1:3,b.svc:1=127.0.0.1:2,*.svc:*=127.0.0.1,*:9090=127.0.0.2:19090"},
		{name: "IPv6 target", in: "a.svc:1=[::1]:2,*.svc:*=[::1]", want: "a.svc:1=[::1]:2,*.svc:*=::1"},
		{name: "no equals sign", in: "a.svc:1", err: `"a.svc:1": want from=to`},
		{name: "no port on the left", in: "a.svc=127.0.0.1:1", err: `"a.svc=127.0.0.1:1": from "a.svc"`},
		{name: "port out of range", in: "a.svc:70000=127.0.0.1:1", err: `port "70000"`},
		{name: "port zero target", in: "a.svc:1=127.0.0.1:0", err: `to "127.0.0.1:0"`},
		{name: "leading zero port", in: "a.svc:080=127.0.0.1:1", err: `port "080"`},
		{name: "URL as target", in: "a.svc:1=http://127.0.0.1:2", err: `to "http://127.0.0.1:2"`},
		{name: "empty target", in: "a.svc:1=", err: `entry "a.svc:1="`},
		{name: "wildcard inside a name", in: "a.*.svc:1=127.0.0.1:2", err: `host "a.*.svc"`},
		{name: "any port to one port", in: "*.svc:*=127.0.0.1:2", err: "must name a host only"},
		{name: "exact host any port to one port", in: "a.svc:*=127.0.0.1:2", err: "must name a host only"},
		{name: "mapped twice", in: "a.svc:1=127.0.0.1:2,A.svc:1=127.0.0.1:3", err: "a.svc:1 is mapped twice"},
		{name: "second entry named", in: "a.svc:1=127.0.0.1:2, b.svc:x=127.0.0.1:3", err: `entry "b.svc:x=127.0.0.1:3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m, err := Parse(tc.in)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				g.Expect(err).To(MatchError(ContainSubstring(EnvVar)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.String()).To(Equal(tc.want))
		})
	}
}

func TestLookup(t *testing.T) {
	m, err := Parse("a.ns.svc:8080=127.0.0.1:1," + // exact
		"*.ns.svc:8080=127.0.0.2:2," + // a suffix on one port
		"*.svc:*=127.0.0.3," + // every port of a suffix, kept
		"b.other.svc:*=127.0.0.4," + // every port of one host
		"*:9090=127.0.0.5:5") // every host on one port
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, tc := range []struct {
		address, want string
		mapped        bool
	}{
		{"a.ns.svc:8080", "127.0.0.1:1", true},
		{"A.NS.SVC.:8080", "127.0.0.1:1", true},
		{"c.ns.svc:8080", "127.0.0.2:2", true},
		{"c.ns.svc:8081", "127.0.0.3:8081", true},
		{"ns.svc:8080", "127.0.0.3:8080", true}, // "*.ns.svc" needs a label before .ns.svc
		{"b.other.svc:7", "127.0.0.3:7", true},  // patterns in order: *.svc:* comes first
		{"prometheus.monitoring:9090", "127.0.0.5:5", true},
		{"svc:80", "", false},
		{"example.com:443", "", false},
		{"not an address", "", false},
	} {
		t.Run(tc.address, func(t *testing.T) {
			to, ok := m.Lookup(tc.address)
			NewWithT(t).Expect(ok).To(Equal(tc.mapped))
			NewWithT(t).Expect(to).To(Equal(tc.want))
		})
	}
	var none *Map
	_, ok := none.Lookup("a.ns.svc:8080")
	NewWithT(t).Expect(ok).To(BeFalse())
}

func TestAddReplacesAndAppends(t *testing.T) {
	g := NewWithT(t)
	m, err := Parse("a.svc:1=127.0.0.1:2,*.svc:*=127.0.0.1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Add("a.svc:1=127.0.0.1:3,*.svc:*=127.0.0.9,b.svc:1=127.0.0.1:4")).To(Succeed())
	g.Expect(m.String()).To(Equal("a.svc:1=127.0.0.1:3,b.svc:1=127.0.0.1:4,*.svc:*=127.0.0.9"))
	g.Expect(m.Add("c.svc:1")).To(MatchError(ContainSubstring(`"c.svc:1"`)))
	var zero Map
	g.Expect(zero.Add("a.svc:1=127.0.0.1:2")).To(Succeed())
	g.Expect(zero.Empty()).To(BeFalse())
}

func TestFromEnv(t *testing.T) {
	g := NewWithT(t)
	t.Setenv(EnvVar, "")
	m, err := FromEnv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m).To(BeNil())
	t.Setenv(EnvVar, "*.svc:*=127.0.0.1")
	m, err = FromEnv()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.String()).To(Equal("*.svc:*=127.0.0.1"))
	t.Setenv(EnvVar, "*.svc:*=127.0.0.1:1")
	_, err = FromEnv()
	g.Expect(err).To(MatchError(ContainSubstring(`QUARTET_DEV_DIAL_MAP entry "*.svc:*=127.0.0.1:1"`)))
}

// The request keeps its in-cluster URL and Host header; only the connection goes to the local server.
func TestTransportKeepsURLAndHost(t *testing.T) {
	g := NewWithT(t)
	var host string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host = r.Host
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	defer srv.Close()
	m, err := Parse("gnmic-core-0.gnmic-core.default.svc.cluster.local:7890=" + strings.TrimPrefix(srv.URL, "http://"))
	g.Expect(err).NotTo(HaveOccurred())
	// An HTTP proxy in the environment is not used for a mapped address.
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	resp, err := m.HTTPClient().Get("http://gnmic-core-0.gnmic-core.default.svc.cluster.local:7890/api/v1/targets")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	g.Expect(string(body)).To(Equal("/api/v1/targets"))
	g.Expect(host).To(Equal("gnmic-core-0.gnmic-core.default.svc.cluster.local:7890"))
}

// Unset, the transport dials the address itself: an unresolvable in-cluster name fails as it would in production.
func TestNilMapDialsAsAddressed(t *testing.T) {
	g := NewWithT(t)
	var m *Map
	g.Expect(m.Transport().DialContext).NotTo(BeNil())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	conn, err := m.DialContext(context.Background(), "tcp", l.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.Close()
	_, err = m.DialContext(context.Background(), "tcp", "gnmic-core-0.gnmic-core.default.svc.cluster.local.invalid:7890")
	g.Expect(err).To(HaveOccurred())
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{"", "a.svc:1=127.0.0.1:2", "*.svc:*=127.0.0.1", "*:9090=[::1]:1,b:2=c",
		"a.svc:*=127.0.0.1:2", "=,=", "x:1=y:2,X:1=y:3", "*.:1=a"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		m, err := Parse(in)
		if err != nil {
			if !strings.Contains(err.Error(), EnvVar) {
				t.Fatalf("error %q does not name the variable", err)
			}
			return
		}
		// What String prints parses back to the same map.
		again, err := Parse(m.String())
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", in, m.String(), err)
		}
		if again.String() != m.String() {
			t.Fatalf("round trip of %q: %q, then %q", in, m.String(), again.String())
		}
		// Every exact entry is found as written, and maps to a dialable address.
		for from := range m.exact {
			to, ok := m.Lookup(from)
			if _, _, err := net.SplitHostPort(to); !ok || err != nil {
				t.Fatalf("Lookup(%q) = %q, %v in %q", from, to, ok, fmt.Sprint(m))
			}
		}
	})
}

// Tests add entries while the manager dials: Add and Lookup may run at once.
func TestAddWhileLookingUp(t *testing.T) {
	g := NewWithT(t)
	m := &Map{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			_ = m.Add(fmt.Sprintf("pod-%d.ns.svc:80=127.0.0.1:%d", i, i+1))
		}
	}()
	for i := range 200 {
		m.Lookup(fmt.Sprintf("pod-%d.ns.svc:80", i))
	}
	<-done
	to, ok := m.Lookup("pod-199.ns.svc:80")
	g.Expect(ok).To(BeTrue())
	g.Expect(to).To(Equal("127.0.0.1:200"))
}
