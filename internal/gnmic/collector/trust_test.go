package collector

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

func tlsCollector(t *testing.T, serving certs.Pair) *httptest.Server {
	t.Helper()
	kp, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// The client trusts exactly the CA of the collector's Cluster: a collector whose certificate another CA signed
// is refused, and an https collector with no CA registered is refused without a connection attempt.
func TestClientTrustsOnlyTheClusterCA(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ca, err := certs.NewCA("core", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	other, err := certs.NewCA("other", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	good, err := certs.IssueServing(ca, []string{"localhost"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	bad, err := certs.IssueServing(other, []string{"localhost"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	goodURL := tlsCollector(t, good).URL
	badURL := tlsCollector(t, bad).URL

	c := &Client{}
	g.Expect(c.Apply(ctx, goodURL, []byte(`{}`))).To(MatchError(ContainSubstring("no CA is known")))
	// The servers listen on 127.0.0.1; the certificate names the pod ("localhost" here), as the operator expects.
	g.Expect(c.Trust("ns/core", goodURL, "localhost", ca.CertPEM)).To(Succeed())
	g.Expect(c.Trust("ns/core", badURL, "localhost", ca.CertPEM)).To(Succeed())
	g.Expect(c.Apply(ctx, goodURL, []byte(`{}`))).To(Succeed())
	g.Expect(c.Apply(ctx, badURL, []byte(`{}`))).To(MatchError(ContainSubstring("certificate")))
	g.Expect(c.Trust("ns/core", goodURL, "other.name", ca.CertPEM)).To(Succeed())
	g.Expect(c.Apply(ctx, goodURL, []byte(`{}`))).To(MatchError(ContainSubstring("certificate")), "a name the certificate lacks")
	g.Expect(c.Trust("ns/core", goodURL, "localhost", []byte("garbage"))).To(HaveOccurred())

	// A deleted Cluster's pods are forgotten: https calls to them are refused again.
	c.Forget("ns/core")
	g.Expect(c.Apply(ctx, badURL, []byte(`{}`))).To(MatchError(ContainSubstring("no CA is known")))
}

// A rotated CA is trusted at once, and the previous one stays trusted for a collector until that collector
// serves a certificate of the new CA (its pod has restarted with the new files): pushes keep succeeding during
// the roll, and afterwards a certificate of the old CA is refused. (Before, the new CA replaced the old one at
// once, so every collector still serving its old certificate failed until its pod had rolled.)
func TestClientTrustsThePreviousCAUntilTheCollectorServesTheNewOne(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := time.Now()
	oldCA, err := certs.NewCA("core", now)
	g.Expect(err).NotTo(HaveOccurred())
	newCA, err := certs.NewCA("core", now)
	g.Expect(err).NotTo(HaveOccurred())
	oldServing, err := certs.IssueServing(oldCA, []string{"localhost"}, now)
	g.Expect(err).NotTo(HaveOccurred())
	newServing, err := certs.IssueServing(newCA, []string{"localhost"}, now)
	g.Expect(err).NotTo(HaveOccurred())

	// One collector, whose certificate the test swaps as a restarted pod would. It closes every connection after
	// one response, so each call is a new handshake, as after a pod restart.
	var current atomic.Pointer[tls.Certificate]
	serve := func(p certs.Pair) {
		kp, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
		g.Expect(err).NotTo(HaveOccurred())
		current.Store(&kp)
	}
	serve(oldServing)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return current.Load(), nil
	}}
	srv.Config.SetKeepAlivesEnabled(false)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	restart := serve

	c := &Client{}
	g.Expect(c.Trust("ns/core", srv.URL, "localhost", oldCA.CertPEM)).To(Succeed())
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(Succeed())

	// The CA rotates; the pod has not restarted yet.
	g.Expect(c.Trust("ns/core", srv.URL, "localhost", newCA.CertPEM)).To(Succeed())
	restart(oldServing) // a new handshake, still with the old certificate
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(Succeed(), "the old CA is trusted while the collector serves its certificate")
	g.Expect(c.Trust("ns/core", srv.URL, "localhost", newCA.CertPEM)).To(Succeed())
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(Succeed())

	// The pod restarts with the new certificate: from then on only the new CA is trusted.
	restart(newServing)
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(Succeed())
	restart(oldServing)
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(MatchError(ContainSubstring("certificate")),
		"once the collector served the new CA's certificate, the old CA is no longer trusted")
	g.Expect(c.Trust("ns/core", srv.URL, "localhost", newCA.CertPEM)).To(Succeed())
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(MatchError(ContainSubstring("certificate")))
}

// The previous CA is trusted only for a bounded window after the rotation: a collector still serving a
// certificate of the old CA once the window is over (a pod stuck on old files, or an interceptor holding an
// old-CA certificate) is refused with an error naming the expired window. (Before, the old CA stayed trusted
// until the collector served a new-CA certificate, with no time limit.)
func TestClientStopsTrustingThePreviousCAAfterTheRotationWindow(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	now := time.Now()
	oldCA, err := certs.NewCA("core", now)
	g.Expect(err).NotTo(HaveOccurred())
	newCA, err := certs.NewCA("core", now)
	g.Expect(err).NotTo(HaveOccurred())
	oldServing, err := certs.IssueServing(oldCA, []string{"localhost"}, now)
	g.Expect(err).NotTo(HaveOccurred())
	srvURL := tlsCollector(t, oldServing).URL

	var clock atomic.Int64 // offset from now, in nanoseconds
	c := &Client{PreviousCAWindow: time.Hour, Now: func() time.Time { return now.Add(time.Duration(clock.Load())) }}
	// Idle connections are closed before each call so that every call is a new handshake (verified anew).
	apply := func() error {
		if hc, err := c.clientFor(srvURL); err == nil {
			hc.CloseIdleConnections()
		}
		return c.Apply(ctx, srvURL, []byte(`{}`))
	}
	g.Expect(c.Trust("ns/core", srvURL, "localhost", oldCA.CertPEM)).To(Succeed())
	g.Expect(apply()).To(Succeed())

	clock.Store(int64(10 * time.Minute))
	g.Expect(c.Trust("ns/core", srvURL, "localhost", newCA.CertPEM)).To(Succeed()) // the rotation, at +10m
	clock.Store(int64(69 * time.Minute))
	g.Expect(apply()).To(Succeed(), "59m after the rotation the old CA is still trusted")
	// Re-applying the same CA (every reconcile does) does not restart the window.
	g.Expect(c.Trust("ns/core", srvURL, "localhost", newCA.CertPEM)).To(Succeed())
	clock.Store(int64(71 * time.Minute))
	g.Expect(apply()).To(MatchError(And(ContainSubstring("certificate"), ContainSubstring("rotation window"))),
		"61m after the rotation the old CA is no longer trusted")
	clock.Store(int64(72 * time.Minute))
	g.Expect(apply()).To(MatchError(ContainSubstring("rotation window")), "and stays refused")
}
