package gnmicserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultAPIAddress is gNMIc's api-server address when its config names none.
const DefaultAPIAddress = ":7890"

// CollectorConfig is what the stand-in takes from a gNMIc config file: the api-server section, the only one it
// serves. Keys are gNMIc's (viper reads them case-insensitively, and so does ParseCollectorConfig).
type CollectorConfig struct {
	// Address is api-server.address, host:port (DefaultAPIAddress when absent).
	Address string
	// TLS is api-server.tls; nil serves plain HTTP.
	TLS *CollectorTLS
}

// CollectorTLS is api-server.tls: gNMIc's TLSConfig keys for a server.
type CollectorTLS struct {
	CertFile, KeyFile, CAFile string
	// ClientAuth is client-auth: "" (require-verify when a ca-file is given, as gNMIc decides) or "require-verify".
	ClientAuth string
}

// MutualTLS reports whether clients must present a certificate of CAFile: client-auth require-verify, or no
// client-auth with a ca-file (gNMIc's default then).
func (t *CollectorTLS) MutualTLS() bool { return t != nil && t.CAFile != "" }

// honouredTopLevel are the top-level keys the stand-in honours (log and debug only change gNMIc's logging).
// Every other section (gnmi-server, tunnel-server, targets, outputs, clustering …) would make gNMIc serve or do
// something the stand-in does not, so it is refused rather than silently ignored.
var honouredTopLevel = []string{"api-server", "debug", "log"}

// honouredAPIServer are the api-server keys the stand-in honours; timeout and enable-metrics change nothing a
// test of the operator can see (/metrics is not served).
var honouredAPIServer = []string{"address", "enable-metrics", "debug", "timeout", "tls"}

// ParseCommandLine reads gNMIc's command line as the operator's pod template gives it (`--config <file>
// collector`, flags before or after the command, `--config=<file>` too) and returns the config file. Any other
// command or flag is refused: the stand-in is only ever a collector.
func ParseCommandLine(args []string) (string, error) {
	var config, command string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--config":
			if i+1 == len(args) || args[i+1] == "" {
				return "", errors.New("flag --config needs a file name")
			}
			i++
			config = args[i]
		case strings.HasPrefix(arg, "--config="):
			if config = strings.TrimPrefix(arg, "--config="); config == "" {
				return "", errors.New("flag --config needs a file name")
			}
		case strings.HasPrefix(arg, "-"):
			return "", fmt.Errorf("unknown flag %q: the gNMIc stand-in accepts only --config <file> collector", arg)
		case command != "":
			return "", fmt.Errorf("unexpected argument %q after command %q", arg, command)
		default:
			command = arg
		}
	}
	switch {
	case command == "":
		return "", errors.New("no command: the gNMIc stand-in runs only `gnmic --config <file> collector`")
	case command != "collector":
		return "", fmt.Errorf("unknown command %q: the gNMIc stand-in runs only `collector`", command)
	case config == "":
		return "", errors.New("--config is required: the stand-in reads no default config file")
	}
	return config, nil
}

// ParseCollectorConfig reads a gNMIc config file (YAML) the way gNMIc reads its api-server section, and refuses
// every setting the stand-in cannot honour, naming it: a collector that silently served plain HTTP, or without
// asking for client certificates, where gNMIc would not, would pass tests that gNMIc fails.
func ParseCollectorConfig(data []byte) (*CollectorConfig, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config is not YAML: %w", err)
	}
	doc = lowerKeys(doc)
	if err := onlyKeys("", doc, honouredTopLevel); err != nil {
		return nil, err
	}
	cfg := &CollectorConfig{Address: DefaultAPIAddress}
	raw, ok := doc["api-server"]
	if !ok || raw == nil {
		return nil, errors.New("no api-server section: gNMIc's collector would serve no API, and neither can the stand-in")
	}
	api, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("api-server is %T, not a map", raw)
	}
	api = lowerKeys(api)
	if err := onlyKeys("api-server.", api, honouredAPIServer); err != nil {
		return nil, err
	}
	if v, ok := api["address"]; ok {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("api-server.address is %T, not a string", v)
		}
		if err := checkListenAddress(s); err != nil {
			return nil, fmt.Errorf("api-server.address %q: %w", s, err)
		}
		cfg.Address = s
	}
	if v, ok := api["tls"]; ok && v != nil {
		t, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("api-server.tls is %T, not a map", v)
		}
		tls, err := parseTLS(lowerKeys(t))
		if err != nil {
			return nil, fmt.Errorf("api-server.tls: %w", err)
		}
		cfg.TLS = tls
	}
	return cfg, nil
}

func parseTLS(t map[string]any) (*CollectorTLS, error) {
	if err := onlyKeys("", t, []string{"ca-file", "cert-file", "client-auth", "key-file", "skip-verify"}); err != nil {
		return nil, err
	}
	str := func(key string) (string, error) {
		v, ok := t[key]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s is %T, not a string", key, v)
		}
		return s, nil
	}
	out := &CollectorTLS{}
	var err error
	for key, dst := range map[string]*string{"cert-file": &out.CertFile, "key-file": &out.KeyFile, "ca-file": &out.CAFile, "client-auth": &out.ClientAuth} {
		if *dst, err = str(key); err != nil {
			return nil, err
		}
	}
	if v, ok := t["skip-verify"]; ok && v != false && v != nil {
		// gNMIc answers skip-verify without a certificate with a self-signed one; the stand-in makes none.
		return nil, errors.New("skip-verify is not supported by the stand-in (it generates no self-signed certificate)")
	}
	switch out.ClientAuth {
	case "", "require-verify":
	case "request", "require", "verify-if-given":
		return nil, fmt.Errorf("client-auth %q is valid for gNMIc but not implemented by the stand-in (only require-verify)", out.ClientAuth)
	default:
		return nil, fmt.Errorf("unknown `client-auth` mode: %s", out.ClientAuth)
	}
	if out.ClientAuth != "" && out.CAFile == "" {
		return nil, fmt.Errorf("ca-file is required when `client-auth` is %q", out.ClientAuth)
	}
	if out.CertFile == "" || out.KeyFile == "" {
		// gNMIc would serve a self-signed certificate (or, with neither files nor a CA, plain HTTP); the stand-in
		// does neither.
		return nil, errors.New("cert-file and key-file are both required by the stand-in")
	}
	return out, nil
}

// checkListenAddress accepts host:port with a numeric port, as net.Listen("tcp", …) does.
func checkListenAddress(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// lowerKeys lowercases the keys of one map level, as viper does.
func lowerKeys(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}

func onlyKeys(prefix string, m map[string]any, allowed []string) error {
	var refused []string
	for k := range m {
		if !slices.Contains(allowed, k) {
			refused = append(refused, prefix+k)
		}
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return fmt.Errorf("not supported by the gNMIc stand-in: %s (it honours only %s%s)", strings.Join(refused, ", "),
			prefix, strings.Join(allowed, ", "+prefix))
	}
	return nil
}

// ServeCollectorConfig starts the stand-in as gNMIc's collector would start its API server from cfg: plain HTTP,
// TLS, or mutual TLS against the ca-file. The files are read once, at start, as gNMIc reads them.
func ServeCollectorConfig(cfg *CollectorConfig) (*Server, error) {
	if cfg.TLS == nil {
		return Start(cfg.Address)
	}
	read := func(file string) ([]byte, error) {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("api-server.tls: %w", err)
		}
		return data, nil
	}
	certPEM, err := read(cfg.TLS.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read(cfg.TLS.KeyFile)
	if err != nil {
		return nil, err
	}
	var caPEM []byte
	if cfg.TLS.MutualTLS() {
		if caPEM, err = read(cfg.TLS.CAFile); err != nil {
			return nil, err
		}
	}
	return StartMutualTLS(cfg.Address, certPEM, keyPEM, caPEM)
}
