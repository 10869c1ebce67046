package plan

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// deliveries follows gNMIc's routing over a decoded payload: a subscription's updates go to the subscription's
// outputs when it names any, else to the target's outputs, else to every output. Each delivery reads
// "target path -> output-marker [processors]", the marker being the output's
// target-template, a key every output plugin has (a made-up key would be one gNMIc drops).
func deliveries(req *gnmicserver.ApplyRequest) []string {
	var out []string
	for tname, tc := range req.Targets {
		for _, sname := range tc.Subscriptions {
			sc := req.Subscriptions[sname]
			if sc == nil {
				continue
			}
			outs := sc.Outputs
			if len(outs) == 0 {
				outs = tc.Outputs
			}
			if len(outs) == 0 {
				for name := range req.Outputs {
					outs = append(outs, name)
				}
			}
			for _, oname := range outs {
				o := req.Outputs[oname]
				if o == nil {
					continue
				}
				procs := fmt.Sprint(o["event-processors"])
				for _, p := range sc.Paths {
					out = append(out, fmt.Sprintf("%s %s -> %v %s", tname, p, o["target-template"], procs))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func markedOutput(name string, typ v1.OutputType) v1.Output {
	return v1.Output{ObjectMeta: meta("lab", name, nil), Spec: v1.OutputSpec{Type: typ,
		Config: &apiextensionsv1.JSON{Raw: []byte(`{"target-template":"` + name + `"}`)}}}
}

func TestTelemetryReachesOnlyItsOwnPipelinesOutputs(t *testing.T) {
	g := NewWithT(t)
	s := baseSnapshot()
	s.Outputs = []v1.Output{markedOutput("out-a", v1.OutputFile), markedOutput("out-b", v1.OutputKafka), markedOutput("shared", v1.OutputNATS)}
	s.Processors = []v1.Processor{
		{ObjectMeta: meta("lab", "trim", nil), Spec: v1.ProcessorSpec{Type: "event-strings"}},
		{ObjectMeta: meta("lab", "drop", nil), Spec: v1.ProcessorSpec{Type: "event-drop"}},
	}
	s.Pipelines = []v1.GnmicPipeline{
		// r1 is in both a and b; "shared" is an output of both, with different processors.
		pipeline("a", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1", "r2"}, SubscriptionRefs: []string{"ifaces"},
			Outputs: v1.PipelineOutputs{OutputRefs: []string{"out-a", "shared"}, ProcessorRefs: []string{"trim"}}}),
		pipeline("b", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"bgp"},
			Outputs: v1.PipelineOutputs{OutputRefs: []string{"out-b", "shared"}, ProcessorRefs: []string{"drop"}}}),
		// c has no output: its target must not be collected at all, least of all into a and b's outputs.
		pipeline("c", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r3"}, SubscriptionRefs: []string{"ifaces", "bgp"}}),
	}
	s.Subscriptions[1].Spec.Paths = []string{"/bgp"}
	p := Build(s)
	req := pushThroughGNMIcPlan(g, p)
	g.Expect(deliveries(req)).To(Equal([]string{
		"lab/r1 /bgp -> out-b [lab/drop]",
		"lab/r1 /bgp -> shared [lab/drop]",
		"lab/r1 /interfaces -> out-a [lab/trim]",
		"lab/r1 /interfaces -> shared [lab/trim]",
		"lab/r2 /interfaces -> out-a [lab/trim]",
		"lab/r2 /interfaces -> shared [lab/trim]",
	}))
	g.Expect(req.Targets).NotTo(HaveKey("lab/r3"))
	for name, sc := range req.Subscriptions {
		g.Expect(sc.Outputs).NotTo(BeEmpty(), "subscription %s must name its outputs, or gNMIc sends it everywhere", name)
	}
	c := p.Pipelines["lab/c"]
	g.Expect(c.NoOutputs).To(BeTrue())
	g.Expect(c.Targets).To(BeZero())
	g.Expect(p.Pipelines["lab/a"].NoOutputs).To(BeFalse())
	g.Expect(strings.Join(keys(req.Subscriptions), " ")).NotTo(ContainSubstring("/c/"))
}
