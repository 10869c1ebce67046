package gnmic

import (
	"crypto/x509"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

// usableSecret accepts a cert-manager Secret only with a certificate and matching key for every requested name
// and, for the REST API, the CA; a missing ca.crt is final (the issuer never writes it), the rest is a wait.
func TestUsableSecret(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	ca, err := certs.NewCA("issuer", now)
	g.Expect(err).NotTo(HaveOccurred())
	names := []string{"*.gnmic-c.ns.svc", "*.gnmic-c.ns.svc.cluster.local"}
	good, err := certs.Issue(ca, names, x509.ExtKeyUsageServerAuth, now)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := certs.Issue(ca, names[:1], x509.ExtKeyUsageServerAuth, now)
	g.Expect(err).NotTo(HaveOccurred())
	api := certRequest{dnsNames: names, needCA: true}
	secret := func(cert, key, caPEM []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{
			corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, "ca.crt": caPEM}}
	}
	for name, tc := range map[string]struct {
		s     *corev1.Secret
		req   certRequest
		why   string
		final bool
	}{
		"issued":                 {s: secret(good.CertPEM, good.KeyPEM, ca.CertPEM), req: api},
		"not written yet":        {s: secret(nil, nil, nil), req: api, why: "no tls.crt/tls.key yet"},
		"key of another cert":    {s: secret(good.CertPEM, other.KeyPEM, ca.CertPEM), req: api, why: "private key does not match"},
		"names not reissued yet": {s: secret(other.CertPEM, other.KeyPEM, ca.CertPEM), req: api, why: "without *.gnmic-c.ns.svc.cluster.local"},
		"issuer writes no CA":    {s: secret(good.CertPEM, good.KeyPEM, nil), req: api, why: "no ca.crt", final: true},
		"client needs no CA":     {s: secret(good.CertPEM, good.KeyPEM, nil), req: certRequest{dnsNames: names}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			why, final := usableSecret(tc.s, tc.req)
			if tc.why == "" {
				g.Expect(why).To(BeEmpty())
			} else {
				g.Expect(why).To(ContainSubstring(tc.why))
			}
			g.Expect(final).To(Equal(tc.final))
		})
	}
}
