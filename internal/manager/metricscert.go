package manager

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/monitoring"
	"github.com/quartet-dev/quartet-operator/internal/webhookcert"
)

// DefaultMetricsCertDir is where controller-runtime's metrics server looks for tls.crt and tls.key by default, and
// where config/manager mounts the metrics Service's OpenShift serving-certificate Secret (optional, so the
// directory stays empty elsewhere).
var DefaultMetricsCertDir = filepath.Join(os.TempDir(), "k8s-metrics-server", "serving-certs")

// serviceCAIssuerPrefix starts the common name of the CA OpenShift's service CA operator signs serving certificates
// with ("openshift-service-serving-signer@<timestamp>").
const serviceCAIssuerPrefix = "openshift-service-serving-signer"

// metricsServing is where the metrics certificate comes from and what a scraper trusts to verify it.
type metricsServing struct {
	// certDir is the metrics server's certificate directory; empty lets controller-runtime generate a self-signed
	// certificate no scraper can verify.
	certDir string
	// ca is the CA the ServiceMonitor trusts instead of monitoring.MetricsCAConfigMap; nil keeps that one.
	ca *monitoring.ConfigMapKey
	// renewer keeps an operator-issued certificate current; nil otherwise.
	renewer *webhookcert.Renewer
}

// ensureMetricsCert chooses the metrics certificate: one mounted in MetricsCertDir (OpenShift's service CA or
// cert-manager) wins; otherwise, with MetricsCertSecret, the manager issues one itself as it does the webhook's
// (internal/webhookcert) and publishes its CA in MetricsCAConfigMap, which the ServiceMonitor trusts.
func (o *Options) ensureMetricsCert(ctx context.Context, cfg *rest.Config) (metricsServing, error) {
	if !o.SecureMetrics || o.MetricsBindAddress == "0" {
		return metricsServing{}, nil
	}
	if o.MetricsCertDir != "" {
		leaf, err := mountedCert(o.MetricsCertDir)
		if err != nil {
			return metricsServing{}, fmt.Errorf("--metrics-cert-dir: %w", err)
		}
		if leaf != nil {
			s := metricsServing{certDir: o.MetricsCertDir}
			if strings.HasPrefix(leaf.Issuer.CommonName, serviceCAIssuerPrefix) {
				ca := monitoring.OpenShiftServiceCA
				s.ca = &ca
			}
			return s, nil
		}
	}
	if o.MetricsCertSecret == "" {
		return metricsServing{}, nil
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return metricsServing{}, err
	}
	return o.issueMetricsCert(ctx, c)
}

// issueMetricsCert has the manager issue the metrics certificate itself (internal/webhookcert, as for the webhook):
// the CA and certificate kept in MetricsCertSecret, the CA published in MetricsCAConfigMap.
func (o *Options) issueMetricsCert(ctx context.Context, c client.Client) (metricsServing, error) {
	// A directory of this process's own: the mounted one may be a read-only volume.
	dir, err := os.MkdirTemp("", "metrics-cert-")
	if err != nil {
		return metricsServing{}, err
	}
	certCfg := webhookcert.Config{
		SecretName: o.MetricsCertSecret, Namespace: podNamespace(o.LeaderElectionNamespace),
		Service: o.MetricsService, CertDir: dir, CAConfigMap: o.MetricsCAConfigMap, Purpose: "metrics",
		Flags: webhookcert.Flags{Secret: "--metrics-cert-secret", Service: "--metrics-service", CertDir: "--metrics-cert-dir"},
	}
	next, err := webhookcert.Ensure(ctx, c, certCfg, time.Now())
	if err != nil {
		return metricsServing{}, err
	}
	return metricsServing{certDir: dir, renewer: &webhookcert.Renewer{Client: c, Config: certCfg, Next: next}}, nil
}

// mountedCert returns the serving certificate in dir, nil when dir holds none (an optional Secret volume whose
// Secret does not exist, as on clusters without OpenShift's service CA).
func mountedCert(dir string) (*x509.Certificate, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, corev1.TLSCertKey))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, corev1.TLSPrivateKeyKey)); err != nil {
		return nil, fmt.Errorf("%s without its key: %w", corev1.TLSCertKey, err)
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate", filepath.Join(dir, corev1.TLSCertKey))
	}
	return x509.ParseCertificate(block.Bytes)
}
