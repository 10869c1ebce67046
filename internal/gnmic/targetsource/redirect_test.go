package targetsource

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
)

// requestLog keeps the headers of every request a server received.
type requestLog struct {
	mu      sync.Mutex
	headers []http.Header
}

func (l *requestLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.headers = append(l.headers, r.Header.Clone())
}

func (l *requestLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.headers)
}

// credentialKinds is every auth kind an HTTP source offers, plus none at all: the custom header rides along in
// each case, so a leak of either shows.
var credentialKinds = map[string]HTTPCredentials{
	"none":         {},
	"basic":        {Basic: true, BasicUser: "u", BasicPassword: "p"},
	"token":        {Token: "tok"},
	"token-scheme": {Token: "tok2", TokenScheme: "Token"},
	"header":       {HeaderName: "X-Api-Key", HeaderValue: "secret-key"},
}

// A redirect to another origin is refused before any request reaches it: Go's client would forward auth.header
// secrets and custom headers there (it strips only Authorization and cookies), which is the leak the same-origin
// rule of pagination exists to prevent.
func TestFetchHTTPRefusesCrossOriginRedirect(t *testing.T) {
	elsewhereLog := &requestLog{}
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhereLog.add(r)
		_, _ = fmt.Fprint(w, `[{"name":"a","address":"h"}]`)
	}))
	defer elsewhere.Close()
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		source := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/inventory", status)
		}))
		for kind, creds := range credentialKinds {
			t.Run(fmt.Sprintf("%d/%s", status, kind), func(t *testing.T) {
				g := NewWithT(t)
				before := elsewhereLog.count()
				_, err := fetch(t, nil, HTTPRequest{URL: source.URL, Creds: creds,
					Headers: map[string]string{"X-Tenant-Secret": "custom"}})
				g.Expect(err).To(MatchError(ErrCrossOrigin))
				g.Expect(err).To(MatchError(ContainSubstring("redirect")))
				g.Expect(elsewhereLog.count()).To(Equal(before), "the other origin was contacted")
			})
		}
		source.Close()
	}
}

// A redirect inside the source's origin is followed with every credential and custom header.
func TestFetchHTTPFollowsSameOriginRedirect(t *testing.T) {
	log := &requestLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
			return
		}
		log.add(r)
		_, _ = fmt.Fprint(w, `[{"name":"a","address":"h"}]`)
	}))
	defer srv.Close()
	for kind, creds := range credentialKinds {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			res, err := fetch(t, nil, HTTPRequest{URL: srv.URL + "/old", Creds: creds,
				Headers: map[string]string{"X-Tenant-Secret": "custom"}})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Pages).To(HaveLen(1))
			h := log.headers[len(log.headers)-1]
			g.Expect(h.Get("X-Tenant-Secret")).To(Equal("custom"))
			if creds.HeaderName != "" {
				g.Expect(h.Get(creds.HeaderName)).To(Equal(creds.HeaderValue))
			}
			if creds.Basic || creds.Token != "" {
				g.Expect(h.Get("Authorization")).NotTo(BeEmpty())
			}
		})
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://inv.example.com/a", "https://inv.example.com/b?x=1", true},
		{"https://inv.example.com/a", "https://INV.example.com:443/b", true},
		{"http://inv.example.com/a", "http://inv.example.com:80/b", true},
		{"https://inv.example.com/a", "http://inv.example.com/a", false},
		{"https://inv.example.com/a", "https://inv.example.com:8443/a", false},
		{"https://inv.example.com/a", "https://evil.example.com/a", false},
		{"https://inv.example.com/a", "https://inv.example.com.evil.io/a", false},
	} {
		t.Run(tc.a+"->"+tc.b, func(t *testing.T) {
			a, _ := url.Parse(tc.a)
			b, _ := url.Parse(tc.b)
			NewWithT(t).Expect(sameOrigin(a, b)).To(Equal(tc.same))
		})
	}
}
