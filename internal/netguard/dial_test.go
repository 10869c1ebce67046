package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/net/dns/dnsmessage"
)

// fakeDNS answers A queries for the names in records on a UDP socket on loopback, so tests resolve real DNS
// names to blocked addresses. Every other query gets an empty NOERROR answer.
func fakeDNS(t *testing.T, records map[string]string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionAvailable: true})
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if ip, ok := records[strings.TrimSuffix(q.Name.String(), ".")]; ok && q.Type == dnsmessage.TypeA {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
					dnsmessage.AResource{A: netip.MustParseAddr(ip).As4()})
			}
			msg, _ := b.Finish()
			_, _ = pc.WriteTo(msg, from)
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", pc.LocalAddr().String())
	}}
}

func get(g *Guard, url string) (string, error) {
	resp, err := g.Client(5*time.Second, nil).Get(url)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

var loopback = netip.MustParsePrefix("127.0.0.1/32")

func TestDefaultGuardBlocksLoopbackServer(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "secret") }))
	defer srv.Close()

	_, err := get(New(), srv.URL)
	g.Expect(errors.Is(err, ErrBlocked)).To(BeTrue(), "default guard must refuse %s, got %v", srv.URL, err)

	body, err := get(New(AllowPrefixesForTesting(loopback)), srv.URL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(body).To(Equal("secret"))
}

func TestDialChecksResolvedAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	resolver := fakeDNS(t, map[string]string{
		"attrs.example.test":    "127.0.0.1",
		"metadata.example.test": "169.254.169.254",
		"private.example.test":  "10.1.2.3",
		"cgnat.example.test":    "100.64.0.7",
		"other.example.test":    "127.0.0.2",
	})
	testGuard := New(AllowPrefixesForTesting(loopback), WithResolver(resolver))

	// The fake resolver really is used: the allowed name reaches the test server.
	body, err := get(testGuard, fmt.Sprintf("http://attrs.example.test:%d/", port))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(body).To(Equal("ok"))

	// The same name through a guard without the test exemption is refused after resolution.
	_, err = get(New(WithResolver(resolver)), fmt.Sprintf("http://attrs.example.test:%d/", port))
	NewWithT(t).Expect(err).To(MatchError(ErrBlocked))
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("127.0.0.1 is loopback")))

	for name, why := range map[string]string{
		"metadata.example.test": "169.254.169.254 is link-local",
		"private.example.test":  "10.1.2.3 is private",
		"cgnat.example.test":    "100.64.0.7 is shared address space",
		"other.example.test":    "127.0.0.2 is loopback",
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			// Each name passes the admission check (it looks public) and is refused at dial time.
			g.Expect(testGuard.CheckHost(name)).To(Succeed())
			_, err := get(testGuard, fmt.Sprintf("http://%s:%d/", name, port))
			g.Expect(err).To(MatchError(ErrBlocked))
			g.Expect(err).To(MatchError(ContainSubstring(why)))
		})
	}
}

func TestRedirectsToBlockedAddressesAreRefused(t *testing.T) {
	var hits int
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits++
		_, _ = io.WriteString(w, "internal")
	}))
	defer target.Close()
	port := target.Listener.Addr().(*net.TCPAddr).Port
	resolver := fakeDNS(t, map[string]string{"rebind.example.test": "127.0.0.2"})

	cases := map[string]string{
		"metadata IP":            "http://169.254.169.254/latest/meta-data/",
		"other loopback address": fmt.Sprintf("http://127.0.0.2:%d/", port),
		"name resolving inside":  fmt.Sprintf("http://rebind.example.test:%d/", port),
		"localhost by name":      fmt.Sprintf("http://localhost:%d/", port),
		"cluster service":        "http://kubernetes.default.svc/",
		"non-http scheme":        "file:///etc/passwd",
	}
	for name, to := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, to, http.StatusFound)
			}))
			defer redirector.Close()
			// Every case must fail with ErrBlocked, not a connection error: the guard refuses before any connect.
			_, err := get(New(AllowPrefixesForTesting(loopback), WithResolver(resolver)), redirector.URL)
			g.Expect(err).To(MatchError(ErrBlocked))
		})
	}
	NewWithT(t).Expect(hits).To(BeZero())
}

func TestRedirectChainIsBounded(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, srv.URL+r.URL.Path+"x", http.StatusFound)
	}))
	defer srv.Close()
	_, err := get(New(AllowPrefixesForTesting(loopback)), srv.URL+"/")
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("stopped after 5 redirects")))
}
