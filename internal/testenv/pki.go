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

// frontProxyFiles are the request-header CA and the API server's proxy client certificate: what kube-apiserver
// needs to forward authenticated requests to an aggregated API server (e.g. an external-metrics adapter).
type frontProxyFiles struct {
	CA, ClientCert, ClientKey string
}

// frontProxyClientName is the CN of the API server's proxy client; aggregated servers allow exactly this name.
const frontProxyClientName = "front-proxy-client"

func writeFrontProxyPKI(dir string) (frontProxyFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return frontProxyFiles{}, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "front-proxy-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return frontProxyFiles{}, err
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return frontProxyFiles{}, err
	}
	clientTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: frontProxyClientName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTemplate, caTemplate, &clientKey.PublicKey, caKey)
	if err != nil {
		return frontProxyFiles{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return frontProxyFiles{}, err
	}
	files := frontProxyFiles{
		CA:         filepath.Join(dir, "front-proxy-ca.crt"),
		ClientCert: filepath.Join(dir, "front-proxy-client.crt"),
		ClientKey:  filepath.Join(dir, "front-proxy-client.key"),
	}
	for path, block := range map[string]*pem.Block{
		files.CA:         {Type: "CERTIFICATE", Bytes: caDER},
		files.ClientCert: {Type: "CERTIFICATE", Bytes: clientDER},
		files.ClientKey:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			return frontProxyFiles{}, err
		}
	}
	return files, nil
}
