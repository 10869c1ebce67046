package registry

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Writes carry a bearer token (the administrator's static token among them): over plain HTTP they are refused
// before the token is looked at, so a client learns at once to use TLS and nothing is authenticated on a
// channel anyone on the path can read. Reads stay open on either. A listener without TLS accepts writes only
// when PlaintextWrites says so (development).
func TestWritesRequireTLS(t *testing.T) {
	g := NewWithT(t)
	r, _, _ := newTestRegistry()
	auth := &countingAuth{}
	plain := httptest.NewServer(Handler(r, auth))
	defer plain.Close()
	c := apiClient{t: t, url: plain.URL}
	status, _, body := c.do("POST", "/agents", testToken, postBody("x"))
	g.Expect(status).To(Equal(http.StatusForbidden), string(body))
	g.Expect(string(body)).To(ContainSubstring("registry writes require TLS"))
	status, _, _ = c.do("DELETE", "/agents/a/x", testToken, "")
	g.Expect(status).To(Equal(http.StatusForbidden))
	g.Expect(auth.calls.Load()).To(BeZero(), "no token was authenticated over plain HTTP")
	status, _, _ = c.do("GET", "/agents", "", "")
	g.Expect(status).To(Equal(http.StatusOK), "reads need no TLS")

	secure := httptest.NewTLSServer(Handler(r, auth))
	defer secure.Close()
	s := apiClient{t: t, url: secure.URL, http: secure.Client()}
	status, _, body = s.do("POST", "/agents", testToken, postBody("x"))
	g.Expect(status).To(Equal(http.StatusCreated), string(body))

	dev := httptest.NewServer(HandlerWith(r, auth, HandlerOptions{PlaintextWrites: true}))
	defer dev.Close()
	status, _, body = apiClient{t: t, url: dev.URL}.do("DELETE", "/agents/a/x", testToken, "")
	g.Expect(status).To(Equal(http.StatusNoContent), string(body))
}

// The registry's listener serves the certificate of --registry-tls-cert-dir, and writes through it pass.
func TestListenTLSServesTheCertDir(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	tmp := httptest.NewTLSServer(http.NotFoundHandler())
	cert := tmp.TLS.Certificates[0]
	pool := tmp.Client()
	tmp.Close()
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)).To(Succeed())
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	tln, err := ListenTLS(ctx, ln, dir)
	g.Expect(err).NotTo(HaveOccurred())
	r, _, _ := newTestRegistry()
	srv := &http.Server{Handler: Handler(r, StaticToken(testToken)), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(tln) }()
	defer srv.Close()
	status, _, body := apiClient{t: t, url: "https://" + ln.Addr().String(), http: pool}.do("POST", "/agents", testToken, postBody("x"))
	g.Expect(status).To(Equal(http.StatusCreated), string(body))

	_, err = ListenTLS(ctx, must(net.Listen("tcp", "127.0.0.1:0")), t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("registry TLS certificate in")))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
