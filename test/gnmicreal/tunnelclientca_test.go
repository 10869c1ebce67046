package gnmicreal

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

// With grpcTunnel.clientCARef the operator's base configuration gives gNMIc tunnel-server.tls{ca-file,
// client-auth: require-verify}: the real gNMIc refuses a peer without a client certificate of that CA at the TLS
// handshake (before it could register an ID), and accepts one that has it.
func TestRealGNMIcTunnelRefusesPeersWithoutADeviceCertificate(t *testing.T) {
	g := NewWithT(t)
	restPort, tunnelPort := freePort(t), freePort(t)
	c := &v1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "lab", Name: "core"}, Spec: v1.ClusterSpec{
		Image: "ghcr.io/openconfig/gnmic:0.47.0", API: &v1.ClusterAPI{RestPort: int32(restPort), PlainHTTP: true},
		GRPCTunnel: &v1.GRPCTunnel{Port: int32(tunnelPort), TLS: &v1.ClusterTLS{}, ClientCARef: &v1.KeyReference{Name: "device-ca"}}}}
	now := time.Now()
	deviceCA, err := certs.NewCA("lab devices", now)
	g.Expect(err).NotTo(HaveOccurred())
	device, err := certs.Issue(deviceCA, []string{"leaf1.lab"}, x509.ExtKeyUsageClientAuth, now)
	g.Expect(err).NotTo(HaveOccurred())
	otherCA, err := certs.NewCA("someone else", now)
	g.Expect(err).NotTo(HaveOccurred())
	stranger, err := certs.Issue(otherCA, []string{"leaf1.lab"}, x509.ExtKeyUsageClientAuth, now)
	g.Expect(err).NotTo(HaveOccurred())

	name := "gnmic-core-tunnel.lab.svc"
	gnmic := startWithFiles(t, c, "/etc/gnmic/tunnel-tls", name,
		map[string]map[string][]byte{"/etc/gnmic/tunnel-client-ca": {"ca.crt": deviceCA.CertPEM}}, "--use-tunnel-server")

	// dial completes a TLS handshake as a peer with cert (none when nil) and reads once: the server's verdict on a
	// client certificate arrives as an alert on the first read (TLS 1.3); an accepted peer just sees no data.
	dial := func(cert *certs.Pair) error {
		cfg := &tls.Config{RootCAs: gnmic.pool, ServerName: name, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
		if cert != nil {
			pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
			if err != nil {
				return err
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tunnelPort), cfg)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close() }()
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		_, err = conn.Read(make([]byte, 1))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil // accepted: the server waits for the HTTP/2 preface
		}
		return err
	}
	g.Eventually(func() error { return dial(&device) }).WithTimeout(30*time.Second).Should(Succeed(), "gNMIc log:\n%s", gnmic.logs)
	g.Expect(dial(nil)).To(MatchError(ContainSubstring("certificate required")))
	g.Expect(dial(&stranger)).To(MatchError(ContainSubstring("certificate")))
}
