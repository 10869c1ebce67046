package registry

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// ListenTLS wraps ln to serve TLS with tls.crt and tls.key of certDir (--registry-tls-cert-dir), reloaded when
// the files change (a cert-manager renewal) until ctx ends. On error ln is closed.
func ListenTLS(ctx context.Context, ln net.Listener, certDir string) (net.Listener, error) {
	w, err := certwatcher.New(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("registry TLS certificate in %s: %w", certDir, err)
	}
	go func() { _ = w.Start(ctx) }()
	return tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.GetCertificate,
		NextProtos: []string{"http/1.1"}}), nil
}
