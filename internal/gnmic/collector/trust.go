package collector

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// trust maps a collector's host:port to the client that verifies it against its Cluster's CA.
type trust struct {
	mu     sync.Mutex
	byHost map[string]*trustedClient
}

// trustedClient calls one collector. Its TLS verification reads the trust below on every handshake, so a
// rotated CA takes effect without a new transport (and without restarting the operator).
type trustedClient struct {
	owner      string
	serverName string
	client     *http.Client

	// now and window come from the Client: the clock and how long a replaced CA stays trusted.
	now    func() time.Time
	window time.Duration

	mu sync.Mutex
	// caPEM is the Cluster's current CA; previous holds the CAs it replaced, trusted for this collector until it
	// serves a certificate of the current CA (its pod has restarted with the new files), so pushes keep working
	// while the pods roll — but never longer than window after their rotation: a pod stuck on old files, or
	// anyone else holding an old-CA certificate, must not keep a rotated-away (maybe compromised) CA alive.
	caPEM    []byte
	current  *x509.CertPool
	previous []retiredCA
	// clientCert is the certificate the operator presents (the collectors' API requires one of the Cluster's CA);
	// read on every handshake, so a renewed one is used from the next connection on.
	clientCert *tls.Certificate
}

// retiredCA is a CA replaced by a rotation, and when that happened.
type retiredCA struct {
	pool      *x509.CertPool
	rotatedAt time.Time
}

// Trust makes every later https call to baseURL (a pod of the Cluster named owner) verify the collector's
// certificate against caPEM (no system roots: a certificate from any other CA is refused) and for serverName (the
// pod's DNS name, which is also the URL's host). Calling it again with the same values keeps the connections. A
// rotated CA is trusted from the next handshake on; the one it replaces stays trusted for this collector until
// the collector presents a certificate of the new CA, and at most PreviousCAWindow after the rotation.
func (c *Client) Trust(owner, baseURL, serverName string, caPEM []byte) error {
	return c.TrustMutual(owner, baseURL, serverName, caPEM, nil)
}

// TrustMutual is Trust that also presents clientCert when the collector asks for a client certificate (its API
// runs with client-auth require-verify). Calling it again with a renewed certificate keeps the connections; new
// ones present the new certificate.
func (c *Client) TrustMutual(owner, baseURL, serverName string, caPEM []byte, clientCert *tls.Certificate) error {
	u, err := url.Parse(baseURL)
	if err != nil {
		return fmt.Errorf("collector URL %q: %w", baseURL, err)
	}
	host := strings.ToLower(u.Host)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("the Cluster's CA bundle holds no PEM certificate")
	}
	c.trust.mu.Lock()
	defer c.trust.mu.Unlock()
	if old := c.trust.byHost[host]; old != nil && old.owner == owner && old.serverName == serverName {
		old.rotate(caPEM, pool)
		old.present(clientCert)
		return nil
	}
	if c.trust.byHost == nil {
		c.trust.byHost = map[string]*trustedClient{}
	}
	if old := c.trust.byHost[host]; old != nil {
		old.client.CloseIdleConnections()
	}
	t := &trustedClient{owner: owner, serverName: serverName, caPEM: caPEM, current: pool, now: c.now, window: c.previousCAWindow(),
		clientCert: clientCert}
	// The plain client's transport is cloned so its dialing (the development dial map, when set) carries over.
	transport := &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	if base, ok := c.http().Transport.(*http.Transport); ok {
		transport = base.Clone()
	}
	transport.TLSClientConfig = &tls.Config{
		ServerName: serverName,
		MinVersion: tls.VersionTLS12,
		// Go's built-in verification takes a fixed RootCAs pool; VerifyConnection below does the same checks
		// against the trust as it is at handshake time, so it is not skipped but replaced.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection:   t.verify,
		// Asked for only by a collector that verifies clients; none (an empty certificate) when not set.
		GetClientCertificate: t.certificate,
	}
	t.client = &http.Client{Timeout: c.http().Timeout, Transport: transport}
	c.trust.byHost[host] = t
	return nil
}

// rotate makes caPEM the current CA; a different previous one is kept until the collector serves the new one or
// the rotation window is over. The same CA again (every reconcile) changes nothing, so the window is not restarted.
func (t *trustedClient) rotate(caPEM []byte, pool *x509.CertPool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if bytes.Equal(t.caPEM, caPEM) {
		return
	}
	t.previous = append(t.previous, retiredCA{pool: t.current, rotatedAt: t.now()})
	t.caPEM, t.current = caPEM, pool
}

// present makes cert the client certificate of the next handshakes (nil keeps the current one).
func (t *trustedClient) present(cert *tls.Certificate) {
	if cert == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.clientCert = cert
}

func (t *trustedClient) certificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.clientCert == nil {
		return &tls.Certificate{}, nil
	}
	return t.clientCert, nil
}

// verify checks the collector's certificate chain as crypto/tls would with RootCAs set: against the current CA,
// else against a previous one still trusted for this collector (within the rotation window). Success with the
// current CA ends the trust of the previous ones. A certificate of a previous CA whose window is over is refused
// with an error naming the window, so the refusal is not mistaken for a foreign certificate. Expired entries are
// kept for that message; they are dropped with the others once the collector serves the current CA.
func (t *trustedClient) verify(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the collector presented no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, cert := range cs.PeerCertificates[1:] {
		intermediates.AddCert(cert)
	}
	opts := func(roots *x509.CertPool) x509.VerifyOptions {
		return x509.VerifyOptions{Roots: roots, Intermediates: intermediates, DNSName: t.serverName,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	}
	leaf := cs.PeerCertificates[0]
	t.mu.Lock()
	defer t.mu.Unlock()
	_, err := leaf.Verify(opts(t.current))
	if err == nil {
		t.previous = nil
		return nil
	}
	now := t.now()
	for _, prev := range t.previous {
		if _, perr := leaf.Verify(opts(prev.pool)); perr != nil {
			continue
		}
		end := prev.rotatedAt.Add(t.window)
		if now.Before(end) {
			return nil
		}
		err = fmt.Errorf("the collector serves a certificate of the CA rotated away at %s; that CA was trusted only for "+
			"the %s rotation window, which ended at %s (restart the collector so it serves its new certificate)",
			prev.rotatedAt.UTC().Format(time.RFC3339), t.window, end.UTC().Format(time.RFC3339))
	}
	return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
}

// clientFor picks the client for a base URL: the verifying one of its Cluster for https, the plain one for http.
// An https URL whose CA is unknown is refused rather than checked against the system roots.
func (c *Client) clientFor(baseURL string) (*http.Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "https" {
		return c.http(), nil
	}
	c.trust.mu.Lock()
	defer c.trust.mu.Unlock()
	if t := c.trust.byHost[strings.ToLower(u.Host)]; t != nil {
		return t.client, nil
	}
	return nil, fmt.Errorf("no CA is known for collector %s", u.Host)
}

// Forget drops the trust of every pod of the Cluster named owner (deleted, or no longer asking for TLS).
func (c *Client) Forget(owner string) {
	c.trust.mu.Lock()
	defer c.trust.mu.Unlock()
	for host, t := range c.trust.byHost {
		if t.owner == owner {
			t.client.CloseIdleConnections()
			delete(c.trust.byHost, host)
		}
	}
}
