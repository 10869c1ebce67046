package olm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/quartet-dev/quartet-operator/internal/monitoring"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
)

// monitoringOnceItsCRDsAppear is the same install on a cluster with the Prometheus Operator: its CRDs are installed
// on the plane the bundle went onto without them (one plane for both runs; the upgrade that follows then installs
// a CSV with them served). The CSV stays Succeeded; the manager as installed creates its ServiceMonitors and
// PrometheusRules; the bundle's scraper token Secret holds a token; and a real Prometheus, configured with exactly
// what the manager's ServiceMonitor names — the token from its authorization Secret, the CA from its ConfigMap, its
// serverName — scrapes the manager's metrics endpoint. The same scrape without the token is refused.
func monitoringOnceItsCRDsAppear(t *testing.T, sub *operatorsv1alpha1.Subscription, m *asinstalled.Manager) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	start := time.Now()
	defer func() { t.Logf("monitoring with its CRDs: %s", time.Since(start).Round(100*time.Millisecond)) }()

	paths, err := testenv.ThirdPartyCRDPaths()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: slices.DeleteFunc(paths, func(p string) bool { return !testenv.IsMonitoringCRD(p) }), ErrorIfPathMissing: true})
	g.Expect(err).NotTo(HaveOccurred())
	// The manager checks discovery every minute; a restart checks at once (as a new pod would).
	m.Restart(t, "manager-with-monitoring")

	g.Eventually(func(g Gomega) {
		g.Expect(m.Process.Exited()).To(Succeed())
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		g.Expect(olmClient.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: sub.Status.InstalledCSV}, csv)).To(Succeed())
		g.Expect(csv.Status.Phase).To(Equal(operatorsv1alpha1.CSVPhaseSucceeded), "CSV %s: %s", csv.Status.Reason, csv.Status.Message)
		want, err := monitoring.Objects(installNamespace, nil)
		g.Expect(err).NotTo(HaveOccurred())
		for _, w := range want {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(w.GroupVersionKind())
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(w), got)).To(Succeed(), "%s %s", w.GetKind(), w.GetName())
		}
		token := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: monitoring.ScraperTokenSecret}, token)).To(Succeed())
		g.Expect(token.Data).To(HaveKeyWithValue(corev1.ServiceAccountTokenKey, Not(BeEmpty())), "the token controller filled the bundle's scraper token Secret")
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	dir := t.TempDir()
	with := scrapeJobFromServiceMonitor(t, dir, m.MetricsAddr(), "manager", true)
	without := scrapeJobFromServiceMonitor(t, dir, m.MetricsAddr(), "manager-without-token", false)
	prom, err := promlab.NewPrometheus(promlab.RequireBinary(t), dir, 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(prom.AddScrapeJob(with)).To(Succeed())
	g.Expect(prom.AddScrapeJob(without)).To(Succeed())
	g.Expect(prom.Start()).To(Succeed())
	t.Cleanup(func() {
		prom.Stop()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", prom.Output())
		}
	})
	g.Eventually(func(g Gomega) {
		targets := scrapeTargets(g, prom.URL)
		g.Expect(targets).To(HaveKeyWithValue("manager", HaveField("Health", "up")))
		g.Expect(targets).To(HaveKeyWithValue("manager-without-token", And(
			HaveField("Health", "down"), HaveField("LastError", ContainSubstring("401")))))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

// serviceMonitorGVK is the kind of the manager's ServiceMonitor.
var serviceMonitorGVK = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}

// scrapeJobFromServiceMonitor translates the manager's ServiceMonitor endpoint, as the Prometheus Operator would,
// into a scrape job named job for addr (the manager's loopback listener stands in for the Service's endpoints): its
// scheme and path, its tlsConfig (CA from the ConfigMap it names, serverName) and, when withToken, its
// authorization (the token from the Secret it names). Secret and ConfigMap are read from the operator's namespace,
// where a ServiceMonitor's references point.
func scrapeJobFromServiceMonitor(t *testing.T, dir, addr, job string, withToken bool) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	sm := &unstructured.Unstructured{}
	sm.SetGroupVersionKind(serviceMonitorGVK)
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: monitoring.ManagerMonitorName}, sm)).To(Succeed())
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	g.Expect(endpoints).To(HaveLen(1))
	e := endpoints[0].(map[string]any)
	str := func(fields ...string) string {
		v, _, _ := unstructured.NestedString(e, fields...)
		return v
	}
	g.Expect(str("scheme")).To(Equal("https"))
	g.Expect(e).NotTo(HaveKey("bearerTokenFile"))
	g.Expect(e).NotTo(HaveKeyWithValue("tlsConfig", HaveKey("insecureSkipVerify")))

	cm := &corev1.ConfigMap{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: str("tlsConfig", "ca", "configMap", "name")}, cm)).To(Succeed())
	caPEM := cm.Data[str("tlsConfig", "ca", "configMap", "key")]
	g.Expect(caPEM).NotTo(BeEmpty(), "the CA ConfigMap %s holds the key the ServiceMonitor names", cm.Name)
	caFile := filepath.Join(dir, job+"-ca.crt")
	g.Expect(os.WriteFile(caFile, []byte(caPEM), 0o600)).To(Succeed())
	serverName := str("tlsConfig", "serverName")
	g.Expect(serverName).NotTo(BeEmpty())

	out := fmt.Sprintf("  - job_name: %s\n    scheme: https\n    metrics_path: %s\n    scrape_interval: 2s\n    scrape_timeout: 2s\n"+
		"    tls_config:\n      ca_file: %q\n      server_name: %s\n", job, str("path"), caFile, serverName)
	if withToken {
		g.Expect(str("authorization", "type")).To(BeElementOf("", "Bearer"))
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: installNamespace, Name: str("authorization", "credentials", "name")}, secret)).To(Succeed())
		token := secret.Data[str("authorization", "credentials", "key")]
		g.Expect(token).NotTo(BeEmpty(), "the Secret %s holds the key the ServiceMonitor names", secret.Name)
		tokenFile := filepath.Join(dir, job+"-token")
		g.Expect(os.WriteFile(tokenFile, token, 0o600)).To(Succeed())
		out += fmt.Sprintf("    authorization:\n      type: Bearer\n      credentials_file: %q\n", tokenFile)
	}
	return out + fmt.Sprintf("    static_configs:\n      - targets: [%q]\n", addr)
}

// scrapeTarget is what Prometheus's targets API says of one target.
type scrapeTarget struct {
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

// scrapeTargets returns Prometheus's active targets by job, once each has been scraped.
func scrapeTargets(g Gomega, promURL string) map[string]scrapeTarget {
	resp, err := http.Get(promURL + "/api/v1/targets?state=active")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Data struct {
			ActiveTargets []scrapeTarget `json:"activeTargets"`
		} `json:"data"`
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
	out := map[string]scrapeTarget{}
	for _, tg := range body.Data.ActiveTargets {
		g.Expect(tg.Health).NotTo(Equal("unknown"), "job %s not scraped yet", tg.Labels["job"])
		out[tg.Labels["job"]] = tg
	}
	g.Expect(out).NotTo(BeEmpty(), "Prometheus has active targets")
	return out
}
