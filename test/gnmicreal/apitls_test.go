package gnmicreal

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/collector"
)

// With spec.api.tls the operator's base configuration gives gNMIc api-server.tls{cert-file, key-file}: the real
// gNMIc serves its REST API over TLS with the mounted certificate; the readiness probe the operator writes (https,
// /api/v1/healthz) is answered, and the operator's collector client — trusting exactly the Cluster's CA under the
// pod's DNS name — gets through, while a client trusting another CA is refused.
func TestRealGNMIcServesTheRESTAPIWithTheOperatorsCertificate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restPort := freePort(t)
	c := &v1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "lab", Name: "core"}, Spec: v1.ClusterSpec{
		Image: "ghcr.io/openconfig/gnmic:0.47.0", API: &v1.ClusterAPI{RestPort: int32(restPort), TLS: &v1.ClusterTLS{}}}}
	// The name the operator verifies each pod under (its DNS name in the headless Service).
	name := "gnmic-core-0.gnmic-core.lab.svc.cluster.local"
	gnmic := startWithCertificate(t, c, "/etc/gnmic/tls", name)
	baseURL := fmt.Sprintf("https://127.0.0.1:%d", restPort)

	// The readiness probe: a kubelet's https probe does not verify; this one does, against the Cluster's CA.
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: gnmic.pool, ServerName: name, MinVersion: tls.VersionTLS12}}}
	g.Eventually(func(g Gomega) {
		resp, err := probe.Get(baseURL + "/api/v1/healthz")
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(resp.TLS).NotTo(BeNil())
		g.Expect(certs.Fingerprint(pemOf(resp.TLS.PeerCertificates[0].Raw))).To(Equal(certs.Fingerprint(gnmic.serving.CertPEM)))
	}).WithTimeout(30*time.Second).Should(Succeed(), "gNMIc log:\n%s", gnmic.logs)

	// The operator's client, set up as the Cluster controller sets it up. gNMIc v0.37 answers GET /api/v1/targets
	// with an object keyed by name where collector mode (≥ 0.45) answers a list, so the body does not decode here;
	// what is checked is that the handshake verified and the collector answered 200.
	operator := &collector.Client{}
	g.Expect(operator.Trust("lab/core", baseURL, name, gnmic.caPEM)).To(Succeed())
	_, err := operator.Targets(ctx, baseURL)
	if err != nil {
		g.Expect(err.Error()).To(HavePrefix("decoding targets from "+baseURL), "only the v0.37 body shape may fail")
	}

	// Trusting another CA, the same client refuses the collector.
	other, err := certs.NewCA("someone else", time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	stranger := &collector.Client{}
	g.Expect(stranger.Trust("lab/core", baseURL, name, other.CertPEM)).To(Succeed())
	_, err = stranger.Targets(ctx, baseURL)
	g.Expect(err).To(MatchError(ContainSubstring("certificate")), "a collector certificate of another CA is refused")
}
