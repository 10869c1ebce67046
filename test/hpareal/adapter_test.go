package hpareal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
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
	bin := adapterBinary(t)
	rules := shippedAdapterRules(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adapter, err := env.StartAggregatedAPI(ctx, testenv.AggregatedAPI{
		Name: "prometheus-adapter", Group: "external.metrics.k8s.io", Version: "v1beta1", Binary: bin,
		Args: func(s testenv.AggregatedServing) []string {
			config := filepath.Join(s.Dir, "config.yaml")
			g.Expect(os.WriteFile(config, rules, 0o600)).To(Succeed())
			return []string{"--secure-port=" + strconv.Itoa(s.Port), "--bind-address=127.0.0.1",
				"--tls-cert-file=" + s.CertFile, "--tls-private-key-file=" + s.KeyFile,
				// Delegated authentication (the API server's front-proxy client certificate, checked against the
				// requestheader CA it publishes in kube-system) and authorization (SubjectAccessReviews), as in a
				// cluster.
				"--lister-kubeconfig=" + s.Kubeconfig, "--authentication-kubeconfig=" + s.Kubeconfig,
				"--authorization-kubeconfig=" + s.Kubeconfig,
				"--prometheus-url=" + prom.URL, "--config=" + config,
				// Series are discovered on each relist: new agents' metrics show up within a second. A discovered
				// metric is kept longer than one relist, or a slow relist makes it unknown for a moment.
				"--metrics-relist-interval=1s", "--metrics-max-age=1m", "--v=4"}
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = adapter.Stop()
		if t.Failed() {
			if out, err := os.ReadFile(adapter.LogFile()); err == nil {
				t.Logf("prometheus-adapter output (tail):\n%s", tail(out, 8000))
			}
		}
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
