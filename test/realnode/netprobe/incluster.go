package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// serviceAccountDir is where the kubelet mounts the pod's service-account token, its namespace and the cluster's
// root CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// apiServerHandler serves /apiserver?path=…[&host=…]: it GETs path from the API server as an in-cluster client
// does — the host from KUBERNETES_SERVICE_HOST and _PORT unless host names another (e.g.
// kubernetes.default.svc), the server's certificate verified against the token volume's ca.crt, the token as
// bearer — and answers with the API server's status and body, or 502 with the error when it was not reached.
func apiServerHandler(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	if !strings.HasPrefix(path, "/") {
		http.Error(w, "path must start with /", http.StatusBadRequest)
		return
	}
	host := r.URL.Query().Get("host")
	if host == "" {
		host = net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	}
	status, body, err := callAPIServer(r.Context(), host, path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func callAPIServer(ctx context.Context, host, path string) (int, []byte, error) {
	token, err := os.ReadFile(filepath.Join(serviceAccountDir, "token"))
	if err != nil {
		return 0, nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(serviceAccountDir, "ca.crt"))
	if err != nil {
		return 0, nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return 0, nil, fmt.Errorf("no certificate in %s/ca.crt", serviceAccountDir)
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+host+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}
