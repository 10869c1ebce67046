package promreal

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
)

// TestQueriesThroughAnAuthenticatingProxy: the real Prometheus behind an https proxy that wants a bearer token, as
// OpenShift's Thanos querier is. The canary's client built from --prometheus-bearer-token-file and
// --prometheus-ca-file gets answers, re-reading a rotated token; without the token the proxy's 401 is a query
// error (a configuration fault, not an outage), and without the CA the certificate is refused.
func TestQueriesThroughAnAuthenticatingProxy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	prom := startPrometheus(t)
	upstream, err := url.Parse(prom.URL)
	g.Expect(err).NotTo(HaveOccurred())
	const token = "scrape-token-1"
	var want atomic.Value
	want.Store(token)
	forward := httputil.NewSingleHostReverseProxy(upstream)
	proxy := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+want.Load().(string) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	dir := t.TempDir()
	caFile := filepath.Join(dir, "service-ca.crt")
	g.Expect(os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE",
		Bytes: proxy.Certificate().Raw}), 0o600)).To(Succeed())
	tokenFile := filepath.Join(dir, "token")
	g.Expect(os.WriteFile(tokenFile, []byte(token+"\n"), 0o600)).To(Succeed())
	ctx := context.Background()

	p, err := rollout.NewPrometheus(proxy.URL, tokenFile, caFile, http.DefaultTransport.(*http.Transport))
	g.Expect(err).NotTo(HaveOccurred())
	p.Timeout = 2 * time.Second
	g.Eventually(func(g Gomega) {
		s, err := p.Query(ctx, "vector(1)", time.Time{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Value).To(Equal(1.0))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The token rotates (a projected ServiceAccount token is rewritten in place): the next query sends the new one.
	want.Store("scrape-token-2")
	g.Expect(os.WriteFile(tokenFile, []byte("scrape-token-2"), 0o600)).To(Succeed())
	s, err := p.Query(ctx, "vector(2)", time.Time{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Value).To(Equal(2.0))

	noToken, err := rollout.NewPrometheus(proxy.URL, "", caFile, http.DefaultTransport.(*http.Transport))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = noToken.Query(ctx, "vector(1)", time.Time{})
	var qe *rollout.QueryError
	g.Expect(errors.As(err, &qe)).To(BeTrue(), "a 401 is a configuration fault: %v", err)
	g.Expect(qe.Msg).To(ContainSubstring("401"))

	noCA, err := rollout.NewPrometheus(proxy.URL, tokenFile, "", http.DefaultTransport.(*http.Transport))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = noCA.Query(ctx, "vector(1)", time.Time{})
	g.Expect(err).To(MatchError(ContainSubstring("certificate")))

	_, err = rollout.NewPrometheus(proxy.URL, tokenFile, filepath.Join(dir, "missing.crt"), http.DefaultTransport.(*http.Transport))
	g.Expect(err).To(MatchError(ContainSubstring("--prometheus-ca-file")))
}
