package helm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/monitoring"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

// metricsScrapedWithTheScraperToken scrapes the manager as installed with what the chart's ServiceMonitor names
// (internal/monitoring/shape ties those names to it): the token the token controller wrote into the shipped
// scraper Secret, the CA the manager published for the certificate it issued, and the metrics Service's DNS name as
// the server name. The scrape is answered; without the token it is refused with 401.
func metricsScrapedWithTheScraperToken(t *testing.T, m *asinstalled.Manager) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	start := time.Now()
	defer func() {
		t.Logf("metrics scraped with the scraper's token: %s", time.Since(start).Round(10*time.Millisecond))
	}()
	var token []byte
	g.Eventually(func(g Gomega) {
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: monitoring.ScraperTokenSecret}, secret)).To(Succeed())
		token = secret.Data[corev1.ServiceAccountTokenKey]
		g.Expect(token).NotTo(BeEmpty(), "the token controller filled the scraper's token Secret")
	}).WithTimeout(time.Minute).Should(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: monitoring.MetricsCAConfigMap}, cm)).To(Succeed())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM([]byte(cm.Data["ca.crt"]))).To(BeTrue(), "the metrics CA ConfigMap holds ca.crt")
	scraper := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, ServerName: monitoring.MetricsServiceName + "." + releaseNamespace + ".svc", MinVersion: tls.VersionTLS12}}}
	scrape := func(g Gomega, withToken bool) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.MetricsAddr()+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if withToken {
			req.Header.Set("Authorization", "Bearer "+string(token))
		}
		resp, err := scraper.Do(req)
		g.Expect(err).NotTo(HaveOccurred(), "TLS verified against the published CA for the Service's name")
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	g.Eventually(func(g Gomega) {
		g.Expect(scrape(g, true)).To(Equal(http.StatusOK))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(scrape(g, false)).To(Equal(http.StatusUnauthorized))
}
