package agentrax_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// Both AgentDeployment webhooks time every answer, by operation and dry run.
func TestAdmissionDurationMetric(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	count := func(webhook, op, dry string) uint64 {
		var n uint64
		if f := metricFamily(g, "agentrax_admission_duration_seconds"); f != nil {
			for _, m := range f.GetMetric() {
				if l := labelsOf(m); l["webhook"] == webhook && l["operation"] == op && l["dry_run"] == dry {
					n += m.GetHistogram().GetSampleCount()
				}
			}
		}
		return n
	}
	mutating, validating, dry := count("mutating", "CREATE", "false"), count("validating", "CREATE", "false"), count("validating", "CREATE", "true")
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "d", "q", 1, 2, 0), client.DryRunAll)).To(Succeed())
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "m", "q", 1, 2, 0))).To(Succeed())
	// Other tests run in parallel: at least this test's answers are counted.
	g.Expect(count("mutating", "CREATE", "false")).To(BeNumerically(">=", mutating+1))
	g.Expect(count("validating", "CREATE", "false")).To(BeNumerically(">=", validating+1))
	g.Expect(count("validating", "CREATE", "true")).To(BeNumerically(">=", dry+1))
}
