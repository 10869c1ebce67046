package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// clientPKIFiles are a CA and one client certificate it signed for the API server.
type clientPKIFiles struct {
	CA, ClientCert, ClientKey string
}

// frontProxyClientName is the CN of the API server's proxy client; aggregated servers allow exactly this name.
const frontProxyClientName = "front-proxy-client"

// kubeletClientName is the CN of the API server's client certificate for kubelets (logs, exec, port-forward).
const kubeletClientName = "kube-apiserver-kubelet-client"

// writeFrontProxyPKI writes the request-header CA and the API server's proxy client certificate: what
// kube-apiserver needs to forward authenticated requests to an aggregated API server (e.g. an external-metrics
// adapter).
func writeFrontProxyPKI(dir string) (clientPKIFiles, error) {
	return writeClientPKI(dir, "front-proxy", frontProxyClientName)
}

// writeKubeletClientPKI writes the CA a real node's kubelet trusts for clients and the API server's client
// certificate for kubelets, so pods/log and the like authenticate to a real kubelet.
func writeKubeletClientPKI(dir string) (clientPKIFiles, error) {
	return writeClientPKI(dir, "kubelet-client", kubeletClientName)
}

// writeClientPKI writes <prefix>-ca.crt and a client certificate named commonName, <prefix>-client.crt/.key.
func writeClientPKI(dir, prefix, commonName string) (clientPKIFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return clientPKIFiles{}, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: prefix + "-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return clientPKIFiles{}, err
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return clientPKIFiles{}, err
	}
	clientTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTemplate, caTemplate, &clientKey.PublicKey, caKey)
	if err != nil {
		return clientPKIFiles{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return clientPKIFiles{}, err
	}
	files := clientPKIFiles{
		CA:         filepath.Join(dir, prefix+"-ca.crt"),
		ClientCert: filepath.Join(dir, prefix+"-client.crt"),
		ClientKey:  filepath.Join(dir, prefix+"-client.key"),
	}
	for path, block := range map[string]*pem.Block{
		files.CA:         {Type: "CERTIFICATE", Bytes: caDER},
		files.ClientCert: {Type: "CERTIFICATE", Bytes: clientDER},
		files.ClientKey:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return clientPKIFiles{}, err
		}
	}
	return files, nil
}
