package pharos

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// seriesOf returns the value of every series of family that carries tenant, keyed by its other label values.
func seriesOf(g Gomega, family, tenant string) map[string]float64 {
	families, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			key, mine := "", false
			for _, l := range m.GetLabel() {
				if l.GetName() == LabelTenant {
					mine = l.GetValue() == tenant
					continue
				}
				key = l.GetValue()
			}
			if !mine {
				continue
			}
			switch {
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// TestRestoredStatePublishedAtZero: on its first tick pharos publishes the restored events by state, and a
// tenant's give-ups and replays start at zero, before anything happens (increase() sees the first give-up).
func TestRestoredStatePublishedAtZero(t *testing.T) {
	g := NewWithT(t)
	o := testOptions()
	o.Persister = &MemoryPersister{events: []Event{{ID: "restored", Trace: "restored", Tenant: "team-zero", State: Done,
		Since: time.Now()}}}
	startPharos(t, o)
	g.Eventually(func(g Gomega) {
		g.Expect(seriesOf(g, "katastroma_pharos_events", "team-zero")).To(Equal(map[string]float64{
			"running": 0, "failed": 0, "replaying": 0, "done": 1, "gave-up": 0, "superseded": 0}))
	}).Should(Succeed())
	g.Expect(seriesOf(g, "katastroma_pharos_events_given_up_total", "team-zero")).To(Equal(map[string]float64{"": 0}))
	g.Expect(seriesOf(g, "katastroma_pharos_replays_total", "team-zero")).To(Equal(map[string]float64{
		"started": 0, "refused": 0, "unknown": 0, "unreachable": 0, "superseded": 0, "untrusted": 0}))
}
