package promreal

import (
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/controllers/gitops"
	"github.com/quartet-dev/quartet-operator/internal/testenv/promlab"
)

// TestTenantDashboardQueriesExportedMetrics: the dashboard the Tenant controller writes for one tenant is a
// sidecar ConfigMap whose every query parses in a real Prometheus, names only metrics a scrape of the katastroma
// binary (stages and pharos) serves, and selects only that tenant's series (every metric selector starts with its tenant matcher).
func TestTenantDashboardQueriesExportedMetrics(t *testing.T) {
	g := NewWithT(t)
	p := promlab.StartPrometheus(t)
	served := operatorScrapes(t).katastroma
	for _, tenant := range []string{"team-a", "a-tenant-whose-name-is-longer-than-grafana-uids-allow"} {
		cm := gitops.TenantDashboard(tenant, "team-a-prod")
		g.Expect(cm.Namespace).To(Equal("team-a-prod"))
		key := gitops.DashboardUID(tenant) + ".json"
		dashboard := sidecarDashboard(g, cm.Name, cm.Labels, cm.Data, key)
		g.Expect(dashboard).To(HaveKeyWithValue("uid", gitops.DashboardUID(tenant)))
		g.Expect(len(gitops.DashboardUID(tenant))).To(BeNumerically("<=", 40), "Grafana's uid limit")

		exprs := checkDashboardQueries(t, p, served, cm.Name, dashboard)
		for _, expr := range exprs {
			for _, n := range metricNames(expr) {
				selectors := regexp.MustCompile(`\b`+regexp.QuoteMeta(n)+`\b(\{[^}]*\})?`).FindAllStringSubmatch(expr, -1)
				for _, sel := range selectors {
					g.Expect(sel[1]).To(HavePrefix(`{tenant="`+tenant+`"`), "%s: %s is not filtered to the tenant", expr, n)
				}
			}
			g.Expect(strings.Count(expr, `tenant="`)).To(Equal(strings.Count(expr, `tenant="`+tenant+`"`)), expr)
		}
	}
	g.Expect(gitops.DashboardUID("a-tenant-whose-name-is-longer-than-grafana-uids-allow")).
		NotTo(Equal(gitops.DashboardUID("a-tenant-whose-name-is-longer-than-grafana-uids-allow-2")),
			"cut uids stay distinct")
}
