// Package certs issues and renews the certificates of a Cluster's collector REST API: one CA per Cluster, which
// the operator's client trusts exclusively, and one serving certificate for the collector pods.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Lifetimes. The serving certificate is short-lived and renewed automatically; the CA outlives many of them, so
// a renewal never changes what the operator trusts.
const (
	CAValidity      = 10 * 365 * 24 * time.Hour
	ServingValidity = 90 * 24 * time.Hour
	// clockSkew backdates NotBefore so a node whose clock is a little behind still accepts a new certificate.
	clockSkew = 5 * time.Minute
)

// Pair is a PEM certificate and its PEM private key.
type Pair struct {
	CertPEM, KeyPEM []byte
}

// NewCA creates a self-signed CA.
func NewCA(commonName string, now time.Time) (Pair, error) {
	tpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"quartet-operator"}},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tpl, nil, nil)
}

// IssueServing issues a serving certificate for dnsNames, signed by ca.
func IssueServing(ca Pair, dnsNames []string, now time.Time) (Pair, error) {
	return Issue(ca, dnsNames, x509.ExtKeyUsageServerAuth, now)
}

// Issue issues a certificate for dnsNames with one extended key usage (server or client authentication), signed
// by ca, valid for ServingValidity.
func Issue(ca Pair, dnsNames []string, usage x509.ExtKeyUsage, now time.Time) (Pair, error) {
	caCert, caKey, err := parsePair(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("CA: %w", err)
	}
	tpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		NotBefore:   now.Add(-clockSkew),
		NotAfter:    now.Add(ServingValidity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	return sign(tpl, caCert, caKey)
}

// RenewAt is when a certificate should be replaced: once two thirds of its lifetime have passed.
func RenewAt(certPEM []byte) (time.Time, error) {
	c, err := parseCert(certPEM)
	if err != nil {
		return time.Time{}, err
	}
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3), nil
}

// ServingValid reports whether serving is usable as it is at now: signed by ca, naming exactly dnsNames, and not
// yet due for renewal. Anything else (a rotated CA, a renamed Service, a damaged Secret) means issue a new one.
func ServingValid(ca, serving Pair, dnsNames []string, now time.Time) bool {
	return LeafValid(ca, serving, dnsNames, x509.ExtKeyUsageServerAuth, now)
}

// LeafValid is ServingValid for a certificate of the given extended key usage.
func LeafValid(ca, leaf Pair, dnsNames []string, usage x509.ExtKeyUsage, now time.Time) bool {
	caCert, err := parseCert(ca.CertPEM)
	if err != nil {
		return false
	}
	cert, _, err := parsePair(leaf)
	if err != nil || !slices.Equal(cert.DNSNames, dnsNames) || !slices.Equal(cert.ExtKeyUsage, []x509.ExtKeyUsage{usage}) {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: dnsNames[0],
		KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return false
	}
	renew, err := RenewAt(leaf.CertPEM)
	return err == nil && now.Before(renew)
}

// CAValid reports whether ca parses, is a CA, and is not yet due for renewal at now.
func CAValid(ca Pair, now time.Time) bool {
	cert, _, err := parsePair(ca)
	if err != nil || !cert.IsCA {
		return false
	}
	renew, err := RenewAt(ca.CertPEM)
	return err == nil && now.Before(renew)
}

// Fingerprint is a short digest of a PEM certificate, put on the pods so a renewal rolls them.
func Fingerprint(certPEM []byte) string {
	sum := sha256.Sum256(certPEM)
	return hex.EncodeToString(sum[:8])
}

// Pool returns a pool holding exactly the certificates of caPEM.
func Pool(caPEM []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no PEM certificate in the CA bundle")
	}
	return pool, nil
}

func sign(tpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return Pair{}, err
	}
	tpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return Pair{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	return Pair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parsePair(p Pair) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, err := parseCert(p.CertPEM)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(p.KeyPEM)
	if block == nil {
		return nil, nil, errors.New("no PEM private key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("private key: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, nil, errors.New("the private key does not match the certificate")
	}
	return cert, key, nil
}
