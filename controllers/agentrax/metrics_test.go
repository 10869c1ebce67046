package agentrax_test

import (
	. "github.com/onsi/gomega"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// phaseSeries reads agentrax_agentdeployment_phase of one agent from the manager's registry (the envtest manager
// runs in this process): phase → value.
func phaseSeries(g Gomega, ns, name string) map[string]float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "agentrax_agentdeployment_phase" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["name"] == name {
				out[labels["phase"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// expectPhaseMetric: the gauge has all five phases, 1 for phase only.
func expectPhaseMetric(g Gomega, ns, name, phase string) {
	series := phaseSeries(g, ns, name)
	g.Expect(series).To(HaveLen(5))
	for p, v := range series {
		if p == phase {
			g.Expect(v).To(Equal(1.0), p)
		} else {
			g.Expect(v).To(BeZero(), p)
		}
	}
}
