package hpareal

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
	"github.com/quartet-dev/quartet-operator/internal/testenv/services"
)

const adapterVersion = "v0.12.0"

// adapterBinary finds the cached prometheus-adapter build; without it the test fails under CI and is skipped
// otherwise, naming the make target that builds it.
func adapterBinary(t *testing.T) string {
	t.Helper()
	name := "prometheus-adapter-" + adapterVersion
	for _, c := range []string{os.Getenv("PROMETHEUS_ADAPTER_BIN"), filepath.Join(testenv.RepoRoot(), "bin", name),
		filepath.Join(testenv.CacheDir(), "tools", name)} {
		if c == "" {
			continue
		}
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c
		}
	}
	services.Missing(t, "prometheus-adapter "+adapterVersion, fmt.Errorf("not in bin/ or %s: run `make prometheus-adapter`",
		filepath.Join(testenv.CacheDir(), "tools")))
	return ""
}

// shippedAdapterRules is the adapter configuration the repository ships: the config.yaml key of the ConfigMap in
// config/components/agentrax-prometheus-adapter.
func shippedAdapterRules(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "components", "agentrax-prometheus-adapter", "adapter-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.Unmarshal(data, cm); err != nil {
		t.Fatal(err)
	}
	rules := cm.Data["config.yaml"]
	if rules == "" {
		t.Fatal("adapter-config.yaml has no data.config.yaml")
	}
	return []byte(rules)
}

// startAdapter runs prometheus-adapter on loopback against prom with the shipped rules, behind a Service of the
// simulated cluster that the API server reaches through the Service router, and registers it as the external
// metrics APIService; it returns once the API server reports the APIService Available.
func startAdapter(t *testing.T, prom *promlab.Prometheus) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	bin := adapterBinary(t)
	dir := t.TempDir()

	const svcNamespace, svcName = "kube-system", "prometheus-adapter"
	caPEM, certFile, keyFile := servingCert(t, dir, svcName+"."+svcNamespace+".svc")
	rules := filepath.Join(dir, "config.yaml")
	g.Expect(os.WriteFile(rules, shippedAdapterRules(t), 0o600)).To(Succeed())
	kubeconfig, err := env.AddAdminKubeconfig("prometheus-adapter")
	g.Expect(err).NotTo(HaveOccurred())
	kc := filepath.Join(dir, "kubeconfig")
	g.Expect(os.WriteFile(kc, kubeconfig, 0o600)).To(Succeed())
	port, err := promlab.FreePort()
	g.Expect(err).NotTo(HaveOccurred())

	proc, err := env.Cluster.Run("prometheus-adapter", nil, bin,
		"--secure-port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile,
		// Delegated authentication (the API server's front-proxy client certificate, checked against the
		// requestheader CA it publishes in kube-system) and authorization (SubjectAccessReviews), as in a cluster.
		"--lister-kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--prometheus-url="+prom.URL, "--config="+rules,
		// Series are discovered on each relist: new agents' metrics show up within a second. A discovered
		// metric is kept longer than one relist, or a slow relist makes it unknown for a moment.
		"--metrics-relist-interval=1s", "--metrics-max-age=1m", "--v=4")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = proc.Stop()
		if t.Failed() {
			if out, err := os.ReadFile(proc.LogFile()); err == nil {
				t.Logf("prometheus-adapter output (tail):\n%s", tail(out, 8000))
			}
		}
	})

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: svcNamespace, Name: svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}}}
	g.Expect(env.Client.Create(ctx, svc)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, svc) })
	// The aggregator calls an APIService Available only with a ready endpoint behind its Service, as a pod would
	// give it. The address is never dialled: the router sends the Service's ClusterIP to the local adapter.
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svcNamespace, Name: svcName,
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.255.254"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](443)}},
	}
	g.Expect(env.Client.Create(ctx, slice)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, slice) })
	route := testenv.ServicePort{Namespace: svcNamespace, Name: svcName, Port: 443}
	env.Cluster.Router.Route(route, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	t.Cleanup(func() { env.Cluster.Router.Unroute(route) })

	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.external.metrics.k8s.io"},
		"spec": map[string]any{
			"group": "external.metrics.k8s.io", "version": "v1beta1",
			"service":  map[string]any{"namespace": svcNamespace, "name": svcName, "port": int64(443)},
			"caBundle": base64.StdEncoding.EncodeToString(caPEM), "groupPriorityMinimum": int64(100), "versionPriority": int64(100),
		},
	}}
	g.Expect(env.Client.Create(ctx, apiService)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, apiService) })
	g.Eventually(func(g Gomega) {
		g.Expect(proc.Exited()).To(Succeed(), "prometheus-adapter exited")
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(apiService.GroupVersionKind())
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(apiService), got)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(And(HaveKeyWithValue("type", "Available"), HaveKeyWithValue("status", "True"))),
			"APIService conditions: %v", conds)
	}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// servingCert writes a self-signed serving certificate for dnsName (and 127.0.0.1) and returns it as PEM (the
// APIService's caBundle) with the paths of the certificate and key files.
func servingCert(t *testing.T, dir, dnsName string) (caPEM []byte, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(2 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caPEM, certFile, keyFile
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
