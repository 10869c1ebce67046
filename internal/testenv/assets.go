package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// KubernetesVersion is the version of kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and etcd's
// pairing that `make envtest` builds.
const KubernetesVersion = "1.37.2"

// k8sCacheDir is where `make envtest` keeps those binaries: "-stamped" because they report their release version
// (older caches held unstamped builds that report v0.0.0).
func k8sCacheDir() string { return filepath.Join(CacheDir(), "k8s", KubernetesVersion+"-stamped") }

// RepoRoot returns the repository's top directory, found from this source file so that tests started from an
// IDE (any working directory) find it too.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// CacheDir is where `make envtest` keeps the control-plane binaries and generated third-party CRDs, outside the
// work tree so clean clones reuse them.
func CacheDir() string {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "quartet-operator")
}

// BinaryAssetsDir finds kube-apiserver, etcd and kubectl: $KUBEBUILDER_ASSETS, then bin/k8s (the symlink `make
// envtest` creates), then the cache directory itself.
func BinaryAssetsDir() (string, error) {
	candidates := []string{
		os.Getenv("KUBEBUILDER_ASSETS"),
		filepath.Join(RepoRoot(), "bin", "k8s"),
		k8sCacheDir(),
	}
	for _, dir := range candidates {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "kube-apiserver")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "etcd")); err == nil {
				return dir, nil
			}
		}
	}
	return "", errors.New("kube-apiserver and etcd not found in $KUBEBUILDER_ASSETS, bin/k8s or " +
		k8sCacheDir() + ": run `make envtest` first")
}

// ThirdPartyCRDPaths returns the CRD files of the other projects our controllers use: Gateway API's standard
// channel, read straight from the sigs.k8s.io/gateway-api module, and prometheus-operator's ServiceMonitor,
// PodMonitor and PrometheusRule, generated from its Go types by `make envtest`.
func ThirdPartyCRDPaths() ([]string, error) {
	gatewayDir, err := moduleDir("sigs.k8s.io/gateway-api")
	if err != nil {
		return nil, err
	}
	standard := filepath.Join(gatewayDir, "config", "crd", "standard")
	gatewayCRDs, err := filepath.Glob(filepath.Join(standard, "gateway.networking.k8s.io_*.yaml"))
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range gatewayCRDs {
		// The ValidatingAdmissionPolicy that guards upgrades is not a CRD.
		if !strings.Contains(filepath.Base(p), "_vap_") {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no Gateway API CRDs under %s", standard)
	}
	monitoring := filepath.Join(RepoRoot(), "bin", "crds", "monitoring")
	for _, plural := range []string{"servicemonitors", "podmonitors", "prometheusrules"} {
		p := filepath.Join(monitoring, "monitoring.coreos.com_"+plural+".yaml")
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s is missing: run `make envtest` to generate the prometheus-operator CRDs", p)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// IsMonitoringCRD reports whether a path of ThirdPartyCRDPaths is one of the Prometheus Operator's CRDs.
func IsMonitoringCRD(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "monitoring.coreos.com_")
}

// CertManagerCRDDir is where `make envtest` generates cert-manager's CRDs (Certificate, CertificateRequest,
// Issuer, ClusterIssuer) from its Go types, for the version pinned by hack/tools/cert-manager. Tests that use
// them add it to Options.ExtraCRDPaths; a missing directory fails the start with the path.
func CertManagerCRDDir() string {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/cert-manager/cert-manager")
	cmd.Dir = filepath.Join(RepoRoot(), "hack", "tools", "cert-manager")
	out, err := cmd.Output()
	version := strings.TrimSpace(string(out))
	if err != nil || version == "" {
		version = "unknown"
	}
	return filepath.Join(CacheDir(), "crds", "cert-manager-"+version)
}

var moduleDirs sync.Map

// moduleDir asks the go command where a dependency of this module is unpacked.
func moduleDir(module string) (string, error) {
	if dir, ok := moduleDirs.Load(module); ok {
		return dir.(string), nil
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("module %s is not downloaded: run `go mod download`", module)
	}
	moduleDirs.Store(module, dir)
	return dir, nil
}

// KwokVersion is the kwok release `make envtest` builds for the simulated nodes of cluster mode.
const KwokVersion = "v0.8.0"

// KwokBinary finds kwok: bin/kwok (the symlink `make envtest` creates), then the cache directory.
func KwokBinary() (string, error) {
	for _, path := range []string{
		filepath.Join(RepoRoot(), "bin", "kwok"),
		filepath.Join(CacheDir(), "kwok", KwokVersion, "kwok"),
	} {
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", errors.New("kwok not found in bin/kwok or " + filepath.Join(CacheDir(), "kwok", KwokVersion) +
		": run `make envtest` first")
}
