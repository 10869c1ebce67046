package fleet_test

import (
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quartet-dev/quartet-operator/controllers/fleet"
)

// reconcileCount is controller-runtime's reconcile_total for the Pipeline controller, summed over results.
func reconcileCount(g Gomega) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == fleet.PipelineControllerName {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// metricValue sums the samples of one metric family whose labels include every given pair. The registry is shared
// by the whole suite: compare values taken around an action (or use a snapshot's delta), never absolute values.
func metricValue(g Gomega, name string, labels map[string]string) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	return sumOf(families, name, labels)
}

// snapshot is the registry at one moment, so a test can assert what its own actions added.
type snapshot []*dto.MetricFamily

func takeSnapshot(g Gomega) snapshot {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	return families
}

// delta is how much a metric grew since the snapshot.
func (s snapshot) delta(g Gomega, name string, labels map[string]string) float64 {
	return metricValue(g, name, labels) - sumOf(s, name, labels)
}

func sumOf(families []*dto.MetricFamily, name string, labels map[string]string) float64 {
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metric
				}
			}
			switch {
			case m.GetCounter() != nil:
				total += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				total += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}
