package plan

import (
	"testing"

	. "github.com/onsi/gomega"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// A prometheus output keeps the port it was given (Snapshot.PrometheusPorts, read back from its Service) when an
// output whose name sorts first appears: the newcomer takes the next free port instead of shifting the others,
// which would restart their listeners and break every scrape configuration.
func TestPrometheusPortsStayWhenAnOutputSortingFirstAppears(t *testing.T) {
	g := NewWithT(t)
	s := wireSnapshot()
	s.Outputs = []v1.Output{{ObjectMeta: meta("lab", "metrics", nil), Spec: v1.OutputSpec{Type: v1.OutputPrometheus}}}
	s.Pipelines[0].Spec.Outputs.OutputRefs = []string{"metrics"}
	before := Build(s)
	g.Expect(before.PrometheusOutputs).To(HaveLen(1))
	g.Expect(before.PrometheusOutputs[0].Port).To(Equal(int32(DefaultPrometheusPort)))

	s.Outputs = append(s.Outputs, v1.Output{ObjectMeta: meta("lab", "alerts", nil), Spec: v1.OutputSpec{Type: v1.OutputPrometheus}})
	s.Pipelines[0].Spec.Outputs.OutputRefs = []string{"alerts", "metrics"}
	s.PrometheusPorts = map[string]int32{"lab/metrics": before.PrometheusOutputs[0].Port}
	after := Build(s)
	ports := map[string]int32{}
	for _, po := range after.PrometheusOutputs {
		ports[po.Name] = po.Port
	}
	g.Expect(ports).To(Equal(map[string]int32{"lab/metrics": DefaultPrometheusPort, "lab/alerts": DefaultPrometheusPort + 1}))
	g.Expect(after.Config.Outputs["lab/metrics"]["listen"]).To(Equal(":9804"))
}
