package manager

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/internal/monitoring"
)

// mountCert writes a serving certificate signed by a CA called caName into a new directory, as a Secret volume
// would, and returns the directory.
func mountCert(t *testing.T, caName string, withKey bool) string {
	t.Helper()
	g := NewWithT(t)
	now := time.Now()
	ca, err := certs.NewCA(caName, now)
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := certs.IssueServing(ca, []string{monitoring.MetricsServiceName + ".quartet-operator.svc"}, now)
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, corev1.TLSCertKey), serving.CertPEM, 0o600)).To(Succeed())
	if withKey {
		g.Expect(os.WriteFile(filepath.Join(dir, corev1.TLSPrivateKeyKey), serving.KeyPEM, 0o600)).To(Succeed())
	}
	return dir
}

// TestMetricsCertSource: a certificate mounted in --metrics-cert-dir is served; when OpenShift's service CA signed
// it the ServiceMonitor trusts openshift-service-ca.crt, any other keeps the operator's CA ConfigMap. An empty
// directory (the optional volume off OpenShift) without --metrics-cert-secret leaves controller-runtime's default;
// a certificate without its key stops the manager, naming the flag.
func TestMetricsCertSource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	o := DefaultOptions()

	o.MetricsCertDir = mountCert(t, "openshift-service-serving-signer@1733500000", true)
	s, err := o.ensureMetricsCert(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.certDir).To(Equal(o.MetricsCertDir))
	g.Expect(s.ca).To(Equal(&monitoring.OpenShiftServiceCA))
	g.Expect(s.renewer).To(BeNil())

	o.MetricsCertDir = mountCert(t, "cert-manager-selfsigned", true)
	s, err = o.ensureMetricsCert(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.certDir).To(Equal(o.MetricsCertDir))
	g.Expect(s.ca).To(BeNil())

	o.MetricsCertDir = t.TempDir()
	s, err = o.ensureMetricsCert(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s).To(Equal(metricsServing{}))

	o.MetricsCertDir = mountCert(t, "openshift-service-serving-signer@1733500000", false)
	_, err = o.ensureMetricsCert(ctx, nil)
	g.Expect(err).To(MatchError(ContainSubstring("--metrics-cert-dir")))
}
