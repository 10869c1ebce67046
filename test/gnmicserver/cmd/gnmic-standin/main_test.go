package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// The program starts from the pod template's command line and config file, and stops at start, naming why, on a
// config it cannot honour: a TLS section it cannot serve is never served as plain HTTP.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		file := filepath.Join(dir, name)
		NewWithT(t).Expect(os.WriteFile(file, []byte(content), 0o600)).To(Succeed())
		return file
	}
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"another command": {args: []string{"--config", write("plain.yaml", "api-server: {address: '127.0.0.1:0'}\n"), "subscribe"},
			wantErr: `unknown command "subscribe"`},
		"a missing config file": {args: []string{"--config", filepath.Join(dir, "missing.yaml"), "collector"},
			wantErr: "reading the config"},
		"TLS without certificate files": {args: []string{"--config", write("ca-only.yaml",
			"api-server: {address: '127.0.0.1:0', tls: {ca-file: /x/ca.crt, client-auth: require-verify}}\n"), "collector"},
			wantErr: "cert-file and key-file are both required"},
		"certificate files that are not there": {args: []string{"--config", write("absent.yaml",
			"api-server: {address: '127.0.0.1:0', tls: {cert-file: /x/tls.crt, key-file: /x/tls.key}}\n"), "collector"},
			wantErr: "starting the API server: api-server.tls: open /x/tls.crt"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := start(tc.args)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}

	g := NewWithT(t)
	srv, err := start([]string{"--config", write("plain.yaml", "api-server: {address: '127.0.0.1:0'}\nlog: true\n"), "collector"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = srv.Close() })
	resp, err := http.Get(srv.URL() + "/api/v1/healthz")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
}
