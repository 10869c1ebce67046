package gnmicreal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	gnmiccontrollers "github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
)

// With grpcTunnel.tls the operator's base configuration gives gNMIc tunnel-server.tls{cert-file, key-file}: the
// real gNMIc reads those keys and serves its tunnel over TLS with the mounted certificate. (gNMIc v0.37 has no
// collector mode; its --use-tunnel-server flag starts the same tunnel server the collector starts from config.)
func TestRealGNMIcServesTheTunnelWithTheOperatorsCertificate(t *testing.T) {
	g := NewWithT(t)
	restPort, tunnelPort := freePort(t), freePort(t)
	c := &v1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "lab", Name: "core"}, Spec: v1.ClusterSpec{
		Image: "ghcr.io/openconfig/gnmic:0.47.0", API: &v1.ClusterAPI{RestPort: int32(restPort), PlainHTTP: true},
		GRPCTunnel: &v1.GRPCTunnel{Port: int32(tunnelPort), TLS: &v1.ClusterTLS{}}}}
	name := "gnmic-core-tunnel.lab.svc"
	gnmic := startWithCertificate(t, c, "/etc/gnmic/tunnel-tls", name, "--use-tunnel-server")

	g.Eventually(func(g Gomega) {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tunnelPort),
			&tls.Config{RootCAs: gnmic.pool, ServerName: name, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = conn.Close() }()
		peer := conn.ConnectionState().PeerCertificates
		g.Expect(peer).NotTo(BeEmpty())
		g.Expect(certs.Fingerprint(pemOf(peer[0].Raw))).To(Equal(certs.Fingerprint(gnmic.serving.CertPEM)))
	}).WithTimeout(30*time.Second).Should(Succeed(), "gNMIc log:\n%s", gnmic.logs)
}

// gnmicWithCertificate is a real gNMIc started from a Cluster's base configuration with a certificate the test
// issued where the Cluster's pods mount it.
type gnmicWithCertificate struct {
	ca      certs.Pair
	caPEM   []byte
	serving certs.Pair
	pool    *x509.CertPool
	logs    *syncBuffer
}

// startWithCertificate writes c's base configuration (gnmiccontrollers.BaseConfig) with mountPath — where the pods
// mount a certificate Secret — moved to a temporary directory holding tls.crt/tls.key issued for name by a new CA,
// adds the operator's target for a fake device (gNMIc v0.37's subscribe wants one) and starts gNMIc subscribe
// with args until the test ends.
func startWithCertificate(t *testing.T, c *v1.Cluster, mountPath, name string, args ...string) *gnmicWithCertificate {
	t.Helper()
	return startWithFiles(t, c, mountPath, name, nil, args...)
}

// startWithFiles is startWithCertificate with more mounted directories: files maps a pod path (a directory the
// base configuration names) to the files written there (name → content) before gNMIc starts.
func startWithFiles(t *testing.T, c *v1.Cluster, mountPath, name string, files map[string]map[string][]byte, args ...string) *gnmicWithCertificate {
	t.Helper()
	g := NewWithT(t)
	bin := gnmicBinary(t)
	base, err := gnmiccontrollers.BaseConfig(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(base).To(ContainSubstring(mountPath + "/tls.crt"))
	dir := t.TempDir()
	base = strings.ReplaceAll(base, mountPath, dir)
	for podPath, content := range files {
		g.Expect(base).To(ContainSubstring(podPath))
		local := t.TempDir()
		base = strings.ReplaceAll(base, podPath, local)
		for file, data := range content {
			g.Expect(os.WriteFile(filepath.Join(local, file), data, 0o600)).To(Succeed())
		}
	}
	now := time.Now()
	ca, err := certs.NewCA(c.Namespace+"/"+c.Name+" collectors", now)
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := certs.IssueServing(ca, []string{name}, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.crt"), serving.CertPEM, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "tls.key"), serving.KeyPEM, 0o600)).To(Succeed())
	// The REST API's Secret also holds the issuing CA, which the API verifies clients against.
	g.Expect(os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o600)).To(Succeed())

	_, addr1 := fakeDevice(t, "r1")
	_, addr2 := fakeDevice(t, "r2")
	body, _, err := plan.Encode(operatorPlan(addr1, addr2).ForPod([]string{"lab/r1"}))
	g.Expect(err).NotTo(HaveOccurred())
	wire := map[string]map[string]any{}
	g.Expect(json.Unmarshal(body, &wire)).To(Succeed())
	cfg := map[string]any{}
	g.Expect(yaml.Unmarshal([]byte(base), &cfg)).To(Succeed())
	cfg["targets"], cfg["subscriptions"], cfg["outputs"] = wire["targets"], wire["subscriptions"], wire["outputs"]
	data, err := yaml.Marshal(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	cfgFile := filepath.Join(dir, "gnmic.yaml")
	g.Expect(os.WriteFile(cfgFile, data, 0o600)).To(Succeed())

	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--config", cfgFile, "subscribe"}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	pool, err := certs.Pool(ca.CertPEM)
	g.Expect(err).NotTo(HaveOccurred())
	return &gnmicWithCertificate{ca: ca, caPEM: ca.CertPEM, serving: serving, pool: pool, logs: logs}
}

func pemOf(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
