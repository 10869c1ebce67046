package manager

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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

// TestMetricsCertIssued: without a mounted certificate the manager issues one for the metrics Service's name, keeps
// it in --metrics-cert-secret and publishes its CA under ca.crt in --metrics-ca-configmap, the ConfigMap the
// ServiceMonitor trusts; the certificate written for the metrics server verifies against that CA.
func TestMetricsCertIssued(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Setenv("POD_NAMESPACE", "ops")
	o := DefaultOptions()
	o.MetricsCertDir = t.TempDir()
	o.MetricsCertSecret = "quartet-operator-metrics-cert"
	c := fake.NewClientBuilder().Build()

	s, err := o.issueMetricsCert(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(s.certDir) })
	g.Expect(s.ca).To(BeNil(), "the ServiceMonitor keeps its own CA ConfigMap")
	g.Expect(s.renewer).NotTo(BeNil())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: o.MetricsCertSecret}, &corev1.Secret{})).To(Succeed())
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "ops", Name: monitoring.MetricsCAConfigMap}, cm)).To(Succeed())

	certPEM, err := os.ReadFile(filepath.Join(s.certDir, corev1.TLSCertKey))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(filepath.Join(s.certDir, corev1.TLSPrivateKeyKey)).To(BeAnExistingFile())
	block, _ := pem.Decode(certPEM)
	g.Expect(block).NotTo(BeNil())
	leaf, err := x509.ParseCertificate(block.Bytes)
	g.Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM([]byte(cm.Data["ca.crt"]))).To(BeTrue())
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: monitoring.MetricsServiceName + ".ops.svc"})
	g.Expect(err).NotTo(HaveOccurred())
}
