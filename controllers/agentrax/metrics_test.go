package agentrax_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

func metricFamily(g Gomega, name string) *dto.MetricFamily {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// The usage-ratio gauge follows usedTotalReplicas / maxTotalReplicas; every reconcile is timed per controller
// and tenant.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "m", "q", 1, 5, 0))).To(Succeed())

	g.Eventually(func(g Gomega) {
		f := metricFamily(g, "agentrax_tenant_quota_usage_ratio")
		g.Expect(f).NotTo(BeNil())
		var value float64 = -1
		for _, m := range f.GetMetric() {
			if labelsOf(m)["tenant"] == ns {
				value = m.GetGauge().GetValue()
			}
		}
		g.Expect(value).To(Equal(0.25))

		h := metricFamily(g, "agentrax_reconcile_duration_seconds")
		g.Expect(h).NotTo(BeNil())
		seen := map[string]uint64{}
		for _, m := range h.GetMetric() {
			if l := labelsOf(m); l["tenant"] == ns {
				seen[l["controller"]] = m.GetHistogram().GetSampleCount()
			}
		}
		g.Expect(seen["agentrax-agentdeployment"]).To(BeNumerically(">", 0))
		g.Expect(seen["agentrax-tenantquota"]).To(BeNumerically(">", 0))
	}).Should(Succeed())
}
