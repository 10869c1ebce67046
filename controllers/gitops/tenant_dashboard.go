package gitops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// DashboardConfigMapName is the ConfigMap holding a tenant's Grafana dashboard, in the Tenant's first namespace.
const DashboardConfigMapName = "katastroma-dashboard"

// GrafanaDashboardLabel is the label the Grafana sidecar (kube-prometheus-stack) imports ConfigMaps by.
const GrafanaDashboardLabel = "grafana_dashboard"

// metricTenantLabel is the label pharos puts the event's tenant in (pharos.LabelTenant; the manager does not
// import pharos, which would register pharos's metrics in the manager's registry).
const metricTenantLabel = "tenant"

// TenantDashboard renders the Grafana dashboard of one tenant as a ConfigMap for the Grafana sidecar, in
// namespace ns. Every query selects only series labelled with the tenant: pharos's event metrics and the
// provisioner's drift and health-verify counters (the stage metrics carry no tenant label).
func TenantDashboard(tenant, ns string) *corev1.ConfigMap {
	sel := func(metric, matchers string) string {
		s := fmt.Sprintf("%s{%s=%q", metric, metricTenantLabel, tenant)
		if matchers != "" {
			s += "," + matchers
		}
		return s + "}"
	}
	panels := []map[string]any{
		panel(1, "timeseries", "Events by state", 0, 0,
			"sum by (state) ("+sel("katastroma_pharos_events", "")+")", "{{state}}"),
		panel(2, "timeseries", "Failures (failed, replaying, gave up)", 12, 0,
			"sum by (state) ("+sel("katastroma_pharos_events", `state=~"failed|replaying|gave-up"`)+")", "{{state}}"),
		panel(3, "timeseries", "Replays by outcome", 0, 8,
			"sum by (outcome) (rate("+sel("katastroma_pharos_replays_total", "")+"[$__rate_interval]))", "{{outcome}}"),
		panel(4, "stat", "Events given up (1h)", 12, 8,
			"sum (increase("+sel("katastroma_pharos_events_given_up_total", "")+"[1h]))", "given up"),
		panel(5, "timeseries", "Drift repaired (objects)", 0, 16,
			"sum (increase("+sel("katastroma_provisioner_drift_repaired_total", "")+"[$__rate_interval]))", "repaired"),
		panel(6, "timeseries", "Health verify outcomes", 12, 16,
			"sum by (outcome) (increase("+sel("katastroma_provisioner_verifies_total", "")+"[$__rate_interval]))", "{{outcome}}"),
	}
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}
	for _, p := range panels {
		p["datasource"] = ds
		for _, t := range p["targets"].([]map[string]any) {
			t["datasource"] = ds
		}
	}
	dashboard := map[string]any{
		"uid": DashboardUID(tenant), "title": "GitOps tenant " + tenant, "schemaVersion": 39, "version": 1,
		"editable": false, "time": map[string]any{"from": "now-6h", "to": "now"}, "refresh": "30s",
		"tags": []string{"gitops", "quartet-operator", "tenant"},
		"templating": map[string]any{"list": []map[string]any{
			{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"}}},
		"panels": panels,
	}
	data, err := json.MarshalIndent(dashboard, "", "  ")
	if err != nil {
		panic(err) // maps of strings and numbers always marshal
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: DashboardConfigMapName, Labels: map[string]string{
			GrafanaDashboardLabel: "1", gitopsv1alpha1.LabelTenant: tenant,
			"app.kubernetes.io/name": "quartet-operator", "app.kubernetes.io/component": "gitops"}},
		// The sidecar writes every dashboard of every ConfigMap into one folder: the key is unique per tenant.
		Data: map[string]string{DashboardUID(tenant) + ".json": string(data)},
	}
}

// DashboardUID is the Grafana uid of a tenant's dashboard. Grafana allows at most 40 characters; a longer name
// is cut and made unique with a hash of the whole name.
func DashboardUID(tenant string) string {
	uid := "katastroma-" + tenant
	if len(uid) <= 40 {
		return uid
	}
	sum := sha256.Sum256([]byte(tenant))
	return uid[:31] + "-" + hex.EncodeToString(sum[:4])
}

func panel(id int, typ, title string, x, y int, expr, legend string) map[string]any {
	return map[string]any{
		"id": id, "type": typ, "title": title,
		"gridPos":     map[string]any{"h": 8, "w": 12, "x": x, "y": y},
		"targets":     []map[string]any{{"refId": "A", "expr": expr, "legendFormat": legend}},
		"fieldConfig": map[string]any{"defaults": map[string]any{"unit": "short"}, "overrides": []any{}},
	}
}

// dashboard writes the tenant's dashboard into its first namespace and removes it from the others (the first
// namespace may change with the spec): one ConfigMap per tenant, so Grafana sees one dashboard per uid.
func (r *TenantReconciler) dashboard(ctx context.Context, t *gitopsv1alpha1.Tenant, ns string, first bool) error {
	if !first {
		return r.deleteDashboard(ctx, t, ns)
	}
	want := TenantDashboard(t.Name, ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: want.Name}}
	return r.write(ctx, t, cm, func() {
		cm.Labels = merge(cm.Labels, want.Labels)
		cm.Data = want.Data
	})
}

// deleteDashboard removes the tenant's dashboard ConfigMap from ns if this tenant's is there.
func (r *TenantReconciler) deleteDashboard(ctx context.Context, t *gitopsv1alpha1.Tenant, ns string) error {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: DashboardConfigMapName}, cm)
	if err != nil || cm.Labels[gitopsv1alpha1.LabelTenant] != t.Name {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(r.Delete(ctx, cm))
}
