package certs

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestServingLifecycle(t *testing.T) {
	g := NewWithT(t)
	names := []string{"*.gnmic-core.ns.svc", "*.gnmic-core.ns.svc.cluster.local"}
	ca, err := NewCA("gnmic-core", start)
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := IssueServing(ca, names, start)
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name  string
		ca    Pair
		names []string
		at    time.Time
		valid bool
	}{
		{"fresh", ca, names, start, true},
		{"half-way", ca, names, start.Add(ServingValidity / 2), true},
		{"two thirds: renew", ca, names, start.Add(ServingValidity * 2 / 3), false},
		{"expired", ca, names, start.Add(ServingValidity + time.Hour), false},
		{"renamed", ca, []string{"*.gnmic-edge.ns.svc"}, start, false},
		{"other CA", mustCA(t), names, start, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(ServingValid(tc.ca, serving, tc.names, tc.at)).To(Equal(tc.valid))
		})
	}
	g.Expect(ServingValid(ca, Pair{CertPEM: serving.CertPEM, KeyPEM: ca.KeyPEM}, names, start)).To(BeFalse(), "mismatched key")
	g.Expect(ServingValid(ca, Pair{}, names, start)).To(BeFalse())
	g.Expect(CAValid(ca, start)).To(BeTrue())
	g.Expect(CAValid(serving, start)).To(BeFalse(), "a leaf is not a CA")
	g.Expect(CAValid(ca, start.Add(CAValidity))).To(BeFalse())
	g.Expect(Fingerprint(serving.CertPEM)).To(HaveLen(16))
}

// A client that trusts exactly the Cluster's CA talks to a server with the issued certificate under a pod DNS
// name, and refuses a server whose certificate another CA signed.
func TestServingCertificateWorksOverTLS(t *testing.T) {
	g := NewWithT(t)
	ca := mustCA(t)
	serving, err := IssueServing(ca, []string{"localhost"}, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	pool, err := Pool(ca.CertPEM)
	g.Expect(err).NotTo(HaveOccurred())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	for _, tc := range []struct {
		name string
		cert Pair
		ok   bool
	}{
		{"issued by the cluster CA", serving, true},
		{"issued by another CA", mustServing(t, mustCA(t)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			kp, err := tls.X509KeyPair(tc.cert.CertPEM, tc.cert.KeyPEM)
			g.Expect(err).NotTo(HaveOccurred())
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}
			srv.StartTLS()
			defer srv.Close()
			resp, err := client.Get("https://localhost:" + portOf(srv.Listener.Addr().String()))
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
				_ = resp.Body.Close()
			} else {
				g.Expect(err).To(MatchError(ContainSubstring("certificate")))
			}
		})
	}
}

func TestPoolRejectsGarbage(t *testing.T) {
	_, err := Pool([]byte("not pem"))
	NewWithT(t).Expect(err).To(HaveOccurred())
}

func mustCA(t *testing.T) Pair {
	t.Helper()
	ca, err := NewCA("other", start)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return ca
}

func mustServing(t *testing.T, ca Pair) Pair {
	t.Helper()
	p, err := IssueServing(ca, []string{"localhost"}, time.Now())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return p
}

func portOf(addr string) string {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[i+1:]
		}
	}
	return addr
}

// Whatever a damaged or hand-edited Secret holds, the checks answer "not valid" instead of failing.
func FuzzServingValid(f *testing.F) {
	ca, _ := NewCA("fuzz", start)
	serving, _ := IssueServing(ca, []string{"a.svc"}, start)
	f.Add(ca.CertPEM, ca.KeyPEM, serving.CertPEM, serving.KeyPEM)
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), []byte{}, []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, caCert, caKey, cert, key []byte) {
		valid := ServingValid(Pair{caCert, caKey}, Pair{cert, key}, []string{"a.svc"}, start)
		renew, err := RenewAt(cert)
		if valid && (err != nil || !start.Before(renew)) {
			t.Fatalf("a certificate judged valid must parse and not be due for renewal: %v", err)
		}
		_ = CAValid(Pair{caCert, caKey}, start)
	})
}

// A client certificate (clientTLS) is valid for client authentication only, and a serving certificate only for
// serving: each check refuses the other kind, so one can never stand in for the other after a spec change.
func TestClientCertificate(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	ca, err := NewCA("core", now)
	g.Expect(err).NotTo(HaveOccurred())
	names := []string{"*.gnmic-core.lab.svc"}
	client, err := Issue(ca, names, x509.ExtKeyUsageClientAuth, now)
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := IssueServing(ca, names, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(LeafValid(ca, client, names, x509.ExtKeyUsageClientAuth, now)).To(BeTrue())
	g.Expect(LeafValid(ca, client, names, x509.ExtKeyUsageServerAuth, now)).To(BeFalse())
	g.Expect(ServingValid(ca, client, names, now)).To(BeFalse())
	g.Expect(LeafValid(ca, serving, names, x509.ExtKeyUsageClientAuth, now)).To(BeFalse())
	g.Expect(LeafValid(ca, client, names, x509.ExtKeyUsageClientAuth, now.Add(ServingValidity*3/4))).To(BeFalse(), "due for renewal")
}
