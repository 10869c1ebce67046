package gnmicserver

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/gnmic/certs"
)

// operatorMutualTLS is the api-server section the operator writes for a Cluster with the default mutual TLS
// (controllers/gnmic baseConfig); test/realnode runs the stand-in on the operator's own ConfigMap.
const operatorMutualTLS = `api-server:
  address: :7890
  enable-metrics: true
  tls:
    ca-file: /etc/gnmic/tls/ca.crt
    cert-file: /etc/gnmic/tls/tls.crt
    client-auth: require-verify
    key-file: /etc/gnmic/tls/tls.key
log: true
`

func TestParseCollectorConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml    string
		want    *CollectorConfig
		wantErr string
	}{
		"the operator's mutual TLS": {yaml: operatorMutualTLS, want: &CollectorConfig{Address: ":7890", TLS: &CollectorTLS{
			CertFile: "/etc/gnmic/tls/tls.crt", KeyFile: "/etc/gnmic/tls/tls.key", CAFile: "/etc/gnmic/tls/ca.crt", ClientAuth: "require-verify"}}},
		"the operator's plain HTTP": {yaml: "api-server:\n  address: :7891\n  enable-metrics: true\nlog: true\n",
			want: &CollectorConfig{Address: ":7891"}},
		"no address is gNMIc's default": {yaml: "api-server: {}\n", want: &CollectorConfig{Address: DefaultAPIAddress}},
		"keys are case-insensitive, as viper reads them": {yaml: "API-Server:\n  Address: 127.0.0.1:1\n  TLS:\n    Cert-File: c\n    KEY-FILE: k\n",
			want: &CollectorConfig{Address: "127.0.0.1:1", TLS: &CollectorTLS{CertFile: "c", KeyFile: "k"}}},
		"a ca-file without client-auth requires client certificates, as gNMIc decides": {
			yaml: "api-server:\n  tls: {cert-file: c, key-file: k, ca-file: ca}\n",
			want: &CollectorConfig{Address: DefaultAPIAddress, TLS: &CollectorTLS{CertFile: "c", KeyFile: "k", CAFile: "ca"}}},

		"no api-server":             {yaml: "log: true\n", wantErr: "no api-server section"},
		"an empty file":             {yaml: "", wantErr: "no api-server section"},
		"not YAML":                  {yaml: "api-server: [\n", wantErr: "config is not YAML"},
		"api-server not a map":      {yaml: "api-server: :7890\n", wantErr: "api-server is string, not a map"},
		"address not a string":      {yaml: "api-server:\n  address: 7890\n", wantErr: "api-server.address is float64, not a string"},
		"address without a port":    {yaml: "api-server:\n  address: localhost\n", wantErr: `api-server.address "localhost"`},
		"address with a named port": {yaml: "api-server:\n  address: :http\n", wantErr: `port "http" is not a number`},
		"a gNMI server it cannot serve": {yaml: "api-server: {}\ngnmi-server:\n  address: :57400\n",
			wantErr: "not supported by the gNMIc stand-in: gnmi-server"},
		"a tunnel server it cannot serve": {yaml: "api-server: {}\ntunnel-server:\n  address: :57401\n",
			wantErr: "not supported by the gNMIc stand-in: tunnel-server"},
		"an unknown api-server key": {yaml: "api-server:\n  cors: {}\n", wantErr: "api-server.cors"},
		"an unknown client-auth mode": {yaml: "api-server:\n  tls: {cert-file: c, key-file: k, ca-file: ca, client-auth: always}\n",
			wantErr: "unknown `client-auth` mode: always"},
		"a client-auth gNMIc has but the stand-in does not": {yaml: "api-server:\n  tls: {cert-file: c, key-file: k, ca-file: ca, client-auth: request}\n",
			wantErr: `client-auth "request" is valid for gNMIc but not implemented by the stand-in`},
		"require-verify without a CA": {yaml: "api-server:\n  tls: {cert-file: c, key-file: k, client-auth: require-verify}\n",
			wantErr: "ca-file is required when `client-auth` is \"require-verify\""},
		"TLS without a certificate is not served as plain HTTP": {yaml: "api-server:\n  tls: {ca-file: ca, client-auth: require-verify}\n",
			wantErr: "cert-file and key-file are both required"},
		"a key without a certificate":           {yaml: "api-server:\n  tls: {key-file: k}\n", wantErr: "cert-file and key-file are both required"},
		"skip-verify's self-signed certificate": {yaml: "api-server:\n  tls: {skip-verify: true}\n", wantErr: "skip-verify is not supported"},
		"an unknown tls key":                    {yaml: "api-server:\n  tls: {cert-file: c, key-file: k, min-version: '1.3'}\n", wantErr: "min-version"},
		"a file name not a string":              {yaml: "api-server:\n  tls: {cert-file: [c], key-file: k}\n", wantErr: "cert-file is []interface {}, not a string"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseCollectorConfig([]byte(tc.yaml))
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func TestParseCommandLine(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		want    string
		wantErr string
	}{
		"the operator's pod template":       {args: []string{"--config", "/etc/gnmic/config.yaml", "collector"}, want: "/etc/gnmic/config.yaml"},
		"the flag after the command":        {args: []string{"collector", "--config", "c.yaml"}, want: "c.yaml"},
		"the flag with =":                   {args: []string{"--config=c.yaml", "collector"}, want: "c.yaml"},
		"no arguments":                      {wantErr: "no command"},
		"another command":                   {args: []string{"--config", "c.yaml", "subscribe"}, wantErr: `unknown command "subscribe"`},
		"no config":                         {args: []string{"collector"}, wantErr: "--config is required"},
		"a flag without its value":          {args: []string{"collector", "--config"}, wantErr: "--config needs a file name"},
		"an empty value":                    {args: []string{"--config=", "collector"}, wantErr: "--config needs a file name"},
		"a flag the stand-in does not know": {args: []string{"--debug", "--config", "c", "collector"}, wantErr: `unknown flag "--debug"`},
		"a second argument":                 {args: []string{"--config", "c", "collector", "extra"}, wantErr: `unexpected argument "extra"`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseCommandLine(tc.args)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

// FuzzParseCollectorConfig: any file either parses into a config the stand-in can serve as it says (an address
// net.Listen takes; TLS with both files, and a CA whenever client certificates are required) or is refused with
// an error, never a panic.
func FuzzParseCollectorConfig(f *testing.F) {
	f.Add([]byte(operatorMutualTLS))
	f.Add([]byte("api-server: {}\n"))
	f.Add([]byte("api-server:\n  tls: {cert-file: c, key-file: k, ca-file: ca}\n"))
	f.Add([]byte("api-server:\n  tls: {ca-file: ca, client-auth: require-verify}\ngnmi-server: {}\n"))
	f.Add([]byte("API-SERVER: {ADDRESS: '[::1]:0'}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseCollectorConfig(data)
		if err != nil {
			return
		}
		if checkListenAddress(cfg.Address) != nil {
			t.Fatalf("accepted address %q", cfg.Address)
		}
		if tls := cfg.TLS; tls != nil {
			if tls.CertFile == "" || tls.KeyFile == "" {
				t.Fatalf("TLS without both files: %+v", tls)
			}
			if tls.ClientAuth != "" && !tls.MutualTLS() {
				t.Fatalf("client-auth %q without a CA: %+v", tls.ClientAuth, tls)
			}
		}
	})
}

// The stand-in serves what the config says: with the operator's mutual TLS settings, only clients with a
// certificate of the ca-file get past the handshake.
func TestServeCollectorConfigMutualTLS(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	now := time.Now()
	ca, err := certs.NewCA("collector-ca", now)
	g.Expect(err).NotTo(HaveOccurred())
	serving, err := certs.IssueServing(ca, []string{"localhost"}, now)
	g.Expect(err).NotTo(HaveOccurred())
	clientPair, err := certs.Issue(ca, []string{"quartet-operator"}, x509.ExtKeyUsageClientAuth, now)
	g.Expect(err).NotTo(HaveOccurred())
	files := map[string][]byte{"tls.crt": serving.CertPEM, "tls.key": serving.KeyPEM, "ca.crt": ca.CertPEM}
	for name, data := range files {
		g.Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
	}
	cfg, err := ParseCollectorConfig([]byte("api-server:\n  address: 127.0.0.1:0\n  tls:\n" +
		"    cert-file: " + filepath.Join(dir, "tls.crt") + "\n    key-file: " + filepath.Join(dir, "tls.key") + "\n" +
		"    ca-file: " + filepath.Join(dir, "ca.crt") + "\n    client-auth: require-verify\n"))
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := ServeCollectorConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = srv.Close() })
	g.Expect(srv.URL()).To(HavePrefix("https://"))

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	get := func(certs ...tls.Certificate) error {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, ServerName: "localhost", Certificates: certs, MinVersion: tls.VersionTLS12}}}
		resp, err := hc.Get(srv.URL() + "/api/v1/healthz")
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	g.Expect(get()).To(MatchError(ContainSubstring("certificate required")))
	own, err := tls.X509KeyPair(clientPair.CertPEM, clientPair.KeyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(get(own)).To(Succeed())

	cfg.TLS.CAFile = filepath.Join(dir, "missing.crt")
	_, err = ServeCollectorConfig(cfg)
	g.Expect(err).To(MatchError(ContainSubstring("missing.crt")), "a CA it cannot read stops it, never plain HTTP")
}
