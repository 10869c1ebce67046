package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// InClusterAPIServerNames are the DNS names pods use for the API server (the `kubernetes` Service in the default
// namespace of the cluster.local domain).
var InClusterAPIServerNames = []string{
	"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
}

// KubernetesServiceIP is the `kubernetes` Service's ClusterIP: the API server gives it the first address of
// ServiceCIDR.
func KubernetesServiceIP() string {
	return netip.MustParsePrefix(ServiceCIDR).Addr().Next().String()
}

// apiServerPKI is what envtest would generate in the API server's certificate directory (a serving certificate
// for localhost and 127.0.0.1 only, and the service-account signing key), made by testenv instead when pods must
// reach the API server: the serving certificate then also names the address pods connect to, the `kubernetes`
// Service's ClusterIP and its in-cluster DNS names, so a pod verifies it with the root CA the controller-manager
// puts into every service-account token volume.
type apiServerPKI struct {
	// CA is the PEM certificate that signed the serving certificate (envtest's SecureServing.CA, hence the test
	// clients' and the controller-manager's root CA).
	CA []byte
}

// Files envtest's API server reads from its certificate directory (controller-runtime's controlplane package): when
// apiserver.crt exists it generates none of them.
const (
	apiServerCertFile = "apiserver.crt"
	apiServerKeyFile  = "apiserver.key"
	saSignerCertFile  = "sa-signer.crt"
	saSignerKeyFile   = "sa-signer.key"
)

// writeAPIServerPKI writes the serving certificate (for localhost, 127.0.0.1, advertise, the `kubernetes`
// Service's ClusterIP and InClusterAPIServerNames) with its key, and a service-account signing key pair, into
// certDir.
func writeAPIServerPKI(certDir, advertise string) (apiServerPKI, error) {
	advertiseIP := net.ParseIP(advertise)
	if advertiseIP == nil {
		return apiServerPKI{}, fmt.Errorf("advertise address %q is not an IP address", advertise)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return apiServerPKI{}, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "testenv-apiserver-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return apiServerPKI{}, err
	}
	servingKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return apiServerPKI{}, err
	}
	servingTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     append([]string{"localhost"}, InClusterAPIServerNames...),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(KubernetesServiceIP()), advertiseIP},
	}
	servingDER, err := x509.CreateCertificate(rand.Reader, servingTemplate, caTemplate, &servingKey.PublicKey, caKey)
	if err != nil {
		return apiServerPKI{}, err
	}
	servingKeyDER, err := x509.MarshalPKCS8PrivateKey(servingKey)
	if err != nil {
		return apiServerPKI{}, err
	}
	// The service-account token signer: the API server signs with the key and verifies with the public key of the
	// certificate, the controller-manager signs legacy tokens with the same key (as envtest's own files do).
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return apiServerPKI{}, err
	}
	saTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(3),
		Subject:               pkix.Name{CommonName: "testenv-service-account-signer"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	saDER, err := x509.CreateCertificate(rand.Reader, saTemplate, saTemplate, &saKey.PublicKey, saKey)
	if err != nil {
		return apiServerPKI{}, err
	}
	saKeyDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return apiServerPKI{}, err
	}
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return apiServerPKI{}, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	var errs []error
	for name, block := range map[string]*pem.Block{
		apiServerCertFile: {Type: "CERTIFICATE", Bytes: servingDER},
		apiServerKeyFile:  {Type: "PRIVATE KEY", Bytes: servingKeyDER},
		saSignerCertFile:  {Type: "CERTIFICATE", Bytes: saDER},
		saSignerKeyFile:   {Type: "PRIVATE KEY", Bytes: saKeyDER},
	} {
		errs = append(errs, os.WriteFile(filepath.Join(certDir, name), pem.EncodeToMemory(block), 0o600))
	}
	if err := errors.Join(errs...); err != nil {
		return apiServerPKI{}, err
	}
	return apiServerPKI{CA: caPEM}, nil
}
