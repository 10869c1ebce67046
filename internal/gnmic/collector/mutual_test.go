package collector

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

// clientCert is a client certificate of ca, as the Cluster controller issues the operator's.
func clientCert(g Gomega, ca certs.Pair) *tls.Certificate {
	pair, err := certs.Issue(ca, []string{"quartet-operator"}, x509.ExtKeyUsageClientAuth, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	kp, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	return &kp
}

// A collector with client-auth require-verify refuses the client until it presents a certificate of the
// Cluster's CA (TrustMutual); a renewed certificate given to TrustMutual is presented from the next handshake on.
func TestClientPresentsItsCertificateToMutualTLSCollectors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ca, err := certs.NewCA("core", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := certs.IssueServing(ca, []string{"localhost"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	kp, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	pool, err := certs.Pool(ca.CertPEM)
	g.Expect(err).NotTo(HaveOccurred())
	var seen atomic.Pointer[x509.Certificate]
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.TLS.PeerCertificates[0])
		w.WriteHeader(http.StatusOK)
	}))
	// No session tickets: a resumed session carries the certificate of the handshake it resumes, and this test
	// looks at which certificate a full handshake presents.
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		MinVersion: tls.VersionTLS12, SessionTicketsDisabled: true}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	c := &Client{}
	g.Expect(c.Trust("ns/core", srv.URL, "localhost", ca.CertPEM)).To(Succeed())
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(MatchError(ContainSubstring("certificate")), "no client certificate")

	first := clientCert(g, ca)
	g.Expect(c.TrustMutual("ns/core", srv.URL, "localhost", ca.CertPEM, first)).To(Succeed())
	g.Expect(c.Apply(ctx, srv.URL, []byte(`{}`))).To(Succeed())
	g.Expect(seen.Load().Raw).To(Equal(first.Certificate[0]))

	renewed := clientCert(g, ca)
	g.Expect(c.TrustMutual("ns/core", srv.URL, "localhost", ca.CertPEM, renewed)).To(Succeed())
	c.Forget("other/cluster") // keeps ns/core's connections
	srv.CloseClientConnections()
	// The first call may still pick the connection the server just closed (EOF); the next dials again.
	g.Eventually(func() error { return c.Apply(ctx, srv.URL, []byte(`{}`)) }).Should(Succeed())
	g.Expect(seen.Load().Raw).To(Equal(renewed.Certificate[0]), "the renewed certificate is presented on the next handshake")
}
