package gnmicreal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/collector"
)

// operatorCertificate is a client certificate from ca, as the Cluster controller issues the operator's own.
func operatorCertificate(g Gomega, ca certs.Pair) *tls.Certificate {
	pair, err := certs.Issue(ca, []string{"quartet-operator"}, x509.ExtKeyUsageClientAuth, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	return &cert
}

// handshakeRefusal opens a bare TLS connection to addr and reads from it: the error says why the server refused
// the client (nil: it did not). The HTTP clients' error texts depend on when the server's alert arrives (HTTP/2 may
// report only that its connection failed, a write may see the reset first); under TLS 1.3 the alert comes after the
// client's side of the handshake, on the first read.
func handshakeRefusal(g Gomega, addr, name string, caPEM []byte, cert *tls.Certificate) error {
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(caPEM)).To(BeTrue())
	cfg := &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
	if cert != nil {
		// Always presented, even when the server's list of acceptable CAs does not name its issuer (Go's client
		// would otherwise send none).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// A Cluster that says nothing about TLS gets mutual TLS on the REST API: the operator's base configuration gives
// gNMIc api-server.tls{cert-file, key-file, ca-file, client-auth: require-verify}, and the real gNMIc then refuses
// at the handshake every client without a certificate of the Cluster's CA (none, or one of another CA), while
// the operator's collector client — presenting its certificate, trusting exactly the Cluster's CA under the
// pod's DNS name — reads GET /api/v1/config. The readiness probe the operator writes is a TCP check, which the
// API passes without a certificate.
func TestRealGNMIcRequiresTheOperatorsClientCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restPort := freePort(t)
	c := &v1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "lab", Name: "core"}, Spec: v1.ClusterSpec{
		Image: "ghcr.io/openconfig/gnmic:0.47.0", API: &v1.ClusterAPI{RestPort: int32(restPort)}}}
	name := "gnmic-core-0.gnmic-core.lab.svc.cluster.local"
	gnmic := startWithCertificate(t, c, "/etc/gnmic/tls", name)
	baseURL := fmt.Sprintf("https://127.0.0.1:%d", restPort)

	// The readiness probe: a TCP connect.
	g.Eventually(func(g Gomega) {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", restPort), time.Second)
		g.Expect(err).NotTo(HaveOccurred())
		_ = conn.Close()
	}).WithTimeout(30*time.Second).Should(Succeed(), "gNMIc log:\n%s", gnmic.logs)

	operator := &collector.Client{}
	g.Expect(operator.TrustMutual("lab/core", baseURL, name, gnmic.caPEM, operatorCertificate(g, gnmic.ca))).To(Succeed())
	var config []byte
	g.Eventually(func(g Gomega) {
		var err error
		config, err = operator.Config(ctx, baseURL)
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(30*time.Second).Should(Succeed(), "gNMIc log:\n%s", gnmic.logs)
	g.Expect(string(config)).To(ContainSubstring("lab/r1"), "the operator reads the collector's configuration")

	// Without a client certificate: refused at the handshake, before any HTTP.
	anonymous := &collector.Client{}
	g.Expect(anonymous.Trust("lab/core", baseURL, name, gnmic.caPEM)).To(Succeed())
	_, err := anonymous.Config(ctx, baseURL)
	g.Expect(err).To(HaveOccurred(), "a client without a certificate reads nothing")
	g.Expect(err.Error()).NotTo(ContainSubstring("HTTP "), "no HTTP answer at all")
	addr := fmt.Sprintf("127.0.0.1:%d", restPort)
	g.Expect(handshakeRefusal(g, addr, name, gnmic.caPEM, nil)).To(
		MatchError(MatchRegexp(`tls: (certificate required|bad certificate)`)), "refused at the TLS handshake")

	// With a client certificate of another CA: refused too.
	other, err := certs.NewCA("someone else", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	impostor := &collector.Client{}
	g.Expect(impostor.TrustMutual("lab/core", baseURL, name, gnmic.caPEM, operatorCertificate(g, other))).To(Succeed())
	_, err = impostor.Config(ctx, baseURL)
	g.Expect(err).To(HaveOccurred(), "a client certificate of another CA reads nothing")
	g.Expect(handshakeRefusal(g, addr, name, gnmic.caPEM, operatorCertificate(g, other))).To(
		MatchError(MatchRegexp(`tls: (bad certificate|unknown certificate authority)`)), "a client certificate of another CA is refused")

	// And a client trusting another CA refuses the collector (the operator trusts the Cluster's CA alone).
	stranger := &collector.Client{}
	g.Expect(stranger.TrustMutual("lab/core", baseURL, name, other.CertPEM, operatorCertificate(g, gnmic.ca))).To(Succeed())
	_, err = stranger.Targets(ctx, baseURL)
	g.Expect(err).To(MatchError(ContainSubstring("certificate")), "a collector certificate of another CA is refused")
}
