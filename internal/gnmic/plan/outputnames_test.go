package plan

import (
	"fmt"
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// namesSnapshot has Pipelines p0…p(n-1), each sending every core Target's ifaces to the Output "prom" through the
// output processors procs[i] (names of Processors "x", "y", "z").
func namesSnapshot(procs [][]string) Snapshot {
	s := baseSnapshot()
	s.Processors = []v1.Processor{
		{ObjectMeta: meta("lab", "x", nil), Spec: v1.ProcessorSpec{Type: "event-strings"}},
		{ObjectMeta: meta("lab", "y", nil), Spec: v1.ProcessorSpec{Type: "event-drop"}},
		{ObjectMeta: meta("lab", "z", nil), Spec: v1.ProcessorSpec{Type: "event-strings"}},
	}
	for i, list := range procs {
		s.Pipelines = append(s.Pipelines, pipeline(fmt.Sprintf("p%d", i), v1.PipelineSpec{Enabled: true,
			TargetSelectors: sel("role", "core"), SubscriptionRefs: []string{"ifaces"},
			Outputs: v1.PipelineOutputs{OutputRefs: []string{"prom"}, ProcessorRefs: list}}))
	}
	return s
}

// outputOf reads the gNMIc output each Pipeline's ifaces subscription is routed to.
func outputOf(g Gomega, p *Plan, n int) []string {
	var out []string
	for i := range n {
		sc := p.Config.Subscriptions[fmt.Sprintf("lab/p%d/ifaces", i)]
		g.Expect(sc).NotTo(BeNil())
		g.Expect(sc.Outputs).To(HaveLen(1))
		out = append(out, sc.Outputs[0])
	}
	return out
}

// Without recorded instances (a Cluster whose status predates status.outputInstances, or a new Output) the names
// are those given before they were recorded, so an upgrade renames nothing.
func TestOutputNamesWithoutRecordsAreTheUnrecordedOnes(t *testing.T) {
	g := NewWithT(t)
	p := Build(namesSnapshot([][]string{nil, nil}))
	g.Expect(outputOf(g, p, 2)).To(Equal([]string{"lab/prom", "lab/prom"}))
	g.Expect(p.OutputInstances).To(Equal([]v1.OutputInstance{{Name: "lab/prom", Output: "prom"}}))

	p = Build(namesSnapshot([][]string{nil, {"x"}, nil}))
	g.Expect(outputOf(g, p, 3)).To(Equal([]string{"lab/p0/prom", "lab/p1/prom", "lab/p2/prom"}))
	g.Expect(p.OutputInstances).To(Equal([]v1.OutputInstance{
		{Name: "lab/p0/prom", Output: "prom"},
		{Name: "lab/p1/prom", Output: "prom", ProcessorsDigest: ProcessorsDigest([]string{"lab/x"})},
		{Name: "lab/p2/prom", Output: "prom"},
	}))
	// Fed back, those names stay.
	s := namesSnapshot([][]string{nil, {"x"}, nil})
	s.OutputInstances = p.OutputInstances
	again := Build(s)
	g.Expect(outputOf(g, again, 3)).To(Equal([]string{"lab/p0/prom", "lab/p1/prom", "lab/p2/prom"}))
	g.Expect(again.Config).To(Equal(p.Config))
}

// The case of the cluster test TestOutputNamesStayWhenAPipelinesProcessorsDiverge, at the plan: the Pipeline whose
// processors changed is split off; the instance the others keep is unchanged, port included.
func TestOnlyTheSplitOffOutputInstanceIsRenamed(t *testing.T) {
	g := NewWithT(t)
	s := namesSnapshot([][]string{nil, nil, nil})
	first := Build(s)
	s = namesSnapshot([][]string{nil, {"x", "y"}, nil})
	s.OutputInstances = first.OutputInstances
	s.PrometheusPorts = map[string]int32{"lab/prom": 9804}
	p := Build(s)
	g.Expect(outputOf(g, p, 3)).To(Equal([]string{"lab/prom", "lab/p1/prom", "lab/prom"}))
	g.Expect(p.Config.Outputs["lab/prom"]).To(Equal(first.Config.Outputs["lab/prom"]))
	g.Expect(p.Config.Outputs["lab/p1/prom"]["event-processors"]).To(Equal([]string{"lab/x", "lab/y"}))
	g.Expect(p.Config.Outputs["lab/p1/prom"]["listen"]).To(Equal(":9805"), "lab/p1/prom sorts first, yet lab/prom keeps its port")

	// p0 changes too, to p1's list: it joins p1's instance; p2 still keeps lab/prom.
	s2 := namesSnapshot([][]string{{"x", "y"}, {"x", "y"}, nil})
	s2.OutputInstances = p.OutputInstances
	p2 := Build(s2)
	g.Expect(outputOf(g, p2, 3)).To(Equal([]string{"lab/p1/prom", "lab/p1/prom", "lab/prom"}))

	// p2 changes to a list of its own while lab/prom has no other user: it keeps the name, with new processors.
	s3 := namesSnapshot([][]string{{"x", "y"}, {"x", "y"}, {"z"}})
	s3.OutputInstances = p2.OutputInstances
	g.Expect(outputOf(g, Build(s3), 3)).To(Equal([]string{"lab/p1/prom", "lab/p1/prom", "lab/prom"}))
}

// Random sequences of processor changes, each plan fed the previous plan's instances: a Pipeline whose processor
// list did not change keeps its output name, Pipelines share a name exactly when their lists are equal-and-joined
// (never two lists on one name), and the instances recorded are exactly the outputs of the plan.
func TestOutputNamesStayAcrossRandomProcessorChanges(t *testing.T) {
	g := NewWithT(t)
	lists := [][]string{nil, {"x"}, {"y"}, {"x", "y"}, {"z"}}
	rng := rand.New(rand.NewPCG(38, 7))
	for run := range 200 {
		n := 2 + rng.IntN(4)
		procs := make([][]string, n)
		var previous []v1.OutputInstance
		var names []string
		for step := range 12 {
			changed := -1
			if step > 0 {
				changed = rng.IntN(n)
				procs[changed] = lists[rng.IntN(len(lists))]
			}
			s := namesSnapshot(procs)
			s.OutputInstances = previous
			p := Build(s)
			now := outputOf(g, p, n)
			for i := range n {
				if step > 0 && i != changed {
					g.Expect(now[i]).To(Equal(names[i]), "run %d step %d: p%d kept its list %v", run, step, i, procs[i])
				}
				for j := range n {
					if now[i] == now[j] {
						g.Expect(ProcessorsDigest(procs[i])).To(Equal(ProcessorsDigest(procs[j])), "run %d step %d", run, step)
					}
				}
			}
			g.Expect(p.OutputInstances).To(HaveLen(len(p.Config.Outputs)))
			for _, in := range p.OutputInstances {
				g.Expect(p.Config.Outputs).To(HaveKey(in.Name))
			}
			previous, names = p.OutputInstances, now
		}
	}
}
