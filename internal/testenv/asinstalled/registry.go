package asinstalled

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry/cmstore"
)

// RegistryOverTLS is an HTTPS client of the running manager's MCP registry as a client in the cluster sees it: it
// trusts only the CA the manager published in the ConfigMap the Deployment names (--registry-ca-configmap, in the
// install namespace), verifies the certificate for the registry Service's DNS name (--registry-service), and its
// connections to that name go to the running manager. It returns the client and the registry's base URL,
// https://<service>.<namespace>.svc:<port>.
func (m *Manager) RegistryOverTLS(ctx context.Context) (*http.Client, string, error) {
	container, err := managerContainer(ctx, m.env, m.in)
	if err != nil {
		return nil, "", err
	}
	names := map[string]string{}
	for _, flag := range []string{"registry-ca-configmap", "registry-service"} {
		if names[flag], err = flagValue(container.Args, flag); err != nil {
			return nil, "", fmt.Errorf("the installed registry publishes no CA: %w", err)
		}
	}
	port, err := m.servicePortOf(ctx, names["registry-service"], "registry-bind-address", cmstore.DefaultBindAddress)
	if err != nil {
		return nil, "", err
	}
	cm := &corev1.ConfigMap{}
	if err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: m.in.Namespace, Name: names["registry-ca-configmap"]}, cm); err != nil {
		return nil, "", fmt.Errorf("the registry's CA ConfigMap: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(cm.Data["ca.crt"])) {
		return nil, "", fmt.Errorf("ConfigMap %s/%s holds no CA certificate under ca.crt", cm.Namespace, cm.Name)
	}
	host := fmt.Sprintf("%s.%s.svc", port.Name, port.Namespace)
	hostPort := net.JoinHostPort(host, fmt.Sprint(port.Port))
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		// Only the Service's name leads to the manager; the certificate is checked against that name.
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != hostPort {
				return nil, fmt.Errorf("registry client: %s is not the registry Service %s", addr, hostPort)
			}
			return dialer.DialContext(ctx, network, m.registryAddr)
		},
	}
	return &http.Client{Transport: transport, Timeout: 10 * time.Second}, "https://" + hostPort, nil
}

// WriteRegistryOverTLS registers an agent in the running manager's MCP registry the way a writer outside the
// operator does — over HTTPS trusting the published CA, with a token of writer (namespace/name, a ServiceAccount
// the installation allows to write, which it creates) for the registry's audience — reads it back and deletes it.
func (m *Manager) WriteRegistryOverTLS(t *testing.T, writerNamespace, writerName string) {
	t.Helper()
	g := gomega.NewWithT(t)
	ctx := context.Background()
	httpClient, base, err := m.RegistryOverTLS(ctx)
	g.Expect(err).NotTo(gomega.HaveOccurred())

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: writerNamespace, Name: writerName}}
	g.Expect(client.IgnoreAlreadyExists(m.env.Client.Create(ctx, sa))).To(gomega.Succeed())
	audience := "agentrax-registry"
	if container, err := managerContainer(ctx, m.env, m.in); err == nil {
		if a, err := flagValue(container.Args, "registry-token-audience"); err == nil {
			audience = a
		}
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptr.To[int64](600)}}
	g.Expect(m.env.Client.SubResource("token").Create(ctx, sa, req)).To(gomega.Succeed())

	entry, err := json.Marshal(map[string]any{"namespace": writerNamespace, "name": "external-agent",
		"endpoint": "https://agents.example.com/mcp", "tools": []string{"search"}})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	do := func(method, path string, body []byte) (int, string, error) {
		r, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		r.Header.Set("Authorization", "Bearer "+req.Status.Token)
		r.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(r)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b), nil
	}
	// 503 until this replica leads; every other answer is final.
	g.Eventually(func(g gomega.Gomega) {
		code, body, err := do(http.MethodPost, "/agents", entry)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(code).To(gomega.BeElementOf(http.StatusCreated, http.StatusOK), "POST /agents over TLS: %s", body)
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(gomega.Succeed())
	code, body, err := do(http.MethodGet, "/agents/"+writerNamespace+"/external-agent", nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(code).To(gomega.Equal(http.StatusOK), body)
	g.Expect(body).To(gomega.ContainSubstring("https://agents.example.com/mcp"))
	code, body, err = do(http.MethodDelete, "/agents/"+writerNamespace+"/external-agent", nil)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(code).To(gomega.BeElementOf(http.StatusOK, http.StatusNoContent), body)
}
