package promreal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
)

// groups are the API groups; each has a PrometheusRule in config/prometheus and a Grafana dashboard component.
var groups = []string{"fleet", "gnmic", "agentrax", "gitops"}

// prometheusRules reads the PrometheusRule objects of config/prometheus, by the group of their component label.
func prometheusRules(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "rules_*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	rules := map[string]*unstructured.Unstructured{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(data, &u.Object)).To(Succeed(), f)
		if u.GetKind() == "PrometheusRule" {
			rules[u.GetLabels()["app.kubernetes.io/component"]] = u
		}
	}
	g.Expect(rules).To(HaveLen(len(groups)))
	for _, group := range groups {
		g.Expect(rules).To(HaveKey(group), "config/prometheus has no PrometheusRule for %s", group)
	}
	return rules
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []struct {
		Alert  string `json:"alert,omitempty"`
		Record string `json:"record,omitempty"`
		Expr   string `json:"expr"`
	} `json:"rules"`
}

func ruleGroups(t *testing.T, rule *unstructured.Unstructured) []ruleGroup {
	t.Helper()
	spec, err := json.Marshal(rule.Object["spec"])
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var s struct {
		Groups []ruleGroup `json:"groups"`
	}
	NewWithT(t).Expect(json.Unmarshal(spec, &s)).To(Succeed())
	return s.Groups
}

// servedBy is the scrape of the program whose metrics a group's rules and dashboard read: the gitops stage and
// pharos metrics are katastroma's (scraped by the ServiceMonitor each Platform gets), the rest the manager's.
func (s *scrapes) servedBy(group string) exported {
	if group == "gitops" {
		return s.katastroma
	}
	return s.manager
}

// TestRulesLoadIntoPrometheus loads every PrometheusRule's groups, as the Prometheus Operator writes them, into a
// real Prometheus: it refuses to start on a rule that does not parse, and then serves every rule. Each rule names
// only metrics a scrape of the running operator serves (scrape_test.go).
func TestRulesLoadIntoPrometheus(t *testing.T) {
	g := NewWithT(t)
	prometheus := promlab.RequireBinary(t)
	scrapes := operatorScrapes(t)
	dir := t.TempDir()
	var files []string
	want := map[string]int{}
	for group, rule := range prometheusRules(t) {
		groups := ruleGroups(t, rule)
		g.Expect(groups).NotTo(BeEmpty(), group)
		served := scrapes.servedBy(group)
		for _, rg := range groups {
			want[rg.Name] = len(rg.Rules)
			for _, r := range rg.Rules {
				g.Expect(metricNames(r.Expr)).NotTo(BeEmpty(), "%s %s%s selects no metric", group, r.Alert, r.Record)
				g.Expect(served.missing(r.Expr)).To(BeEmpty(), "%s %s%s names metrics the operator's /metrics does not serve; it serves: %s",
					group, r.Alert, r.Record, served.names())
			}
		}
		data, err := yaml.Marshal(map[string]any{"groups": rule.Object["spec"].(map[string]any)["groups"]})
		g.Expect(err).NotTo(HaveOccurred())
		f := filepath.Join(dir, group+".rules.yaml")
		g.Expect(os.WriteFile(f, data, 0o600)).To(Succeed())
		files = append(files, f)
	}

	p, err := promlab.NewPrometheus(prometheus, t.TempDir(), 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.SetRuleFiles(files...)).To(Succeed())
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", p.Output())
		}
	})
	g.Expect(p.Start()).To(Succeed(), "Prometheus loads the rules")

	var resp struct {
		Status string `json:"status"`
		Data   struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	getJSON(t, p.URL+"/api/v1/rules", &resp)
	g.Expect(resp.Status).To(Equal("success"))
	loaded := map[string]int{}
	for _, rg := range resp.Data.Groups {
		loaded[rg.Name] = len(rg.Rules)
	}
	g.Expect(loaded).To(Equal(want), "every rule group is served with all its rules")
}

func getJSON(t *testing.T, u string, into any) {
	t.Helper()
	resp, err := http.Get(u)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	NewWithT(t).Expect(json.NewDecoder(resp.Body).Decode(into)).To(Succeed(), u)
}

// dashboardQueries returns the PromQL of a Grafana dashboard's panel targets and the metrics its label_values
// variables read.
func dashboardQueries(t *testing.T, dashboard map[string]any) (exprs, variableMetrics []string) {
	t.Helper()
	labelValues := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*,`)
	var walk func(key string, v any)
	walk = func(key string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				walk(k, child)
			}
		case []any:
			for _, child := range x {
				walk(key, child)
			}
		case string:
			switch {
			case key == "expr":
				exprs = append(exprs, x)
			case (key == "query" || key == "definition") && strings.HasPrefix(x, "label_values("):
				m := labelValues.FindStringSubmatch(x)
				NewWithT(t).Expect(m).NotTo(BeNil(), "variable %q names no metric", x)
				variableMetrics = append(variableMetrics, m[1])
			}
		}
	}
	walk("", dashboard)
	return exprs, variableMetrics
}

// grafanaVariables are replaced before Prometheus parses a panel's query.
var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// TestDashboardsQueryExportedMetrics: each group has a dashboard ConfigMap for the Grafana sidecar; every panel query
// parses in a real Prometheus and, like every variable, names only metrics a scrape of the running operator serves.
func TestDashboardsQueryExportedMetrics(t *testing.T) {
	g := NewWithT(t)
	p := promlab.StartPrometheus(t)
	scrapes := operatorScrapes(t)
	for _, group := range groups {
		file := filepath.Join(testenv.RepoRoot(), "config", "components", group+"-grafana-dashboard", "dashboard-configmap.yaml")
		data, err := os.ReadFile(file)
		g.Expect(err).NotTo(HaveOccurred(), "%s has no dashboard", group)
		cm := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal(data, &cm.Object)).To(Succeed(), file)
		g.Expect(cm.GetKind()).To(Equal("ConfigMap"))
		raw, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		dashboard := sidecarDashboard(g, file, cm.GetLabels(), raw, group+".json")
		g.Expect(dashboard).To(HaveKeyWithValue("uid", group))
		checkDashboardQueries(t, p, scrapes.servedBy(group), file, dashboard)
	}
}

// sidecarDashboard checks that a ConfigMap is one the Grafana sidecar imports and decodes its dashboard under key.
func sidecarDashboard(g Gomega, name string, labels, data map[string]string, key string) map[string]any {
	g.Expect(labels).To(HaveKeyWithValue("grafana_dashboard", "1"), "the Grafana sidecar imports %s", name)
	g.Expect(data).To(HaveKey(key), name)
	var dashboard map[string]any
	g.Expect(json.Unmarshal([]byte(data[key]), &dashboard)).To(Succeed(), name)
	return dashboard
}

// checkDashboardQueries: every panel query of a dashboard parses in the real Prometheus p and, like every
// variable, names only metrics the scrape served serves. It returns the panel queries.
func checkDashboardQueries(t *testing.T, p *promlab.Prometheus, served exported, name string, dashboard map[string]any) []string {
	t.Helper()
	g := NewWithT(t)
	otherVariable := regexp.MustCompile(`\$\{?[a-zA-Z_]+\}?`)
	exprs, variableMetrics := dashboardQueries(t, dashboard)
	g.Expect(exprs).NotTo(BeEmpty(), name)
	for _, m := range variableMetrics {
		g.Expect(served.has(m)).To(BeTrue(), "%s: a variable reads %s, which the operator's /metrics does not serve", name, m)
	}
	for _, expr := range exprs {
		g.Expect(metricNames(expr)).NotTo(BeEmpty(), "%s: %s selects no metric", name, expr)
		g.Expect(served.missing(expr)).To(BeEmpty(), "%s: %s names metrics the operator's /metrics does not serve; it serves: %s",
			name, expr, served.names())
		query := otherVariable.ReplaceAllString(grafanaVariables.Replace(expr), ".*")
		var resp struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		getJSON(t, p.URL+"/api/v1/query?query="+url.QueryEscape(query), &resp)
		g.Expect(resp.Status).To(Equal("success"), fmt.Sprintf("%s: %s: %s", name, query, resp.Error))
	}
	return exprs
}
