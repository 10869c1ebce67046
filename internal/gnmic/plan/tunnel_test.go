package plan

import (
	"testing"

	. "github.com/onsi/gomega"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func tunnelPolicy(name string) v1.TunnelTargetPolicy {
	return v1.TunnelTargetPolicy{ObjectMeta: meta("lab", name, nil),
		Spec: v1.TunnelTargetPolicySpec{Match: &v1.TunnelTargetMatch{Type: "GNMI_GNOI", ID: "^leaf-"}}}
}

// A Pipeline with a tunnel policy and no resolved subscription sends no tunnel match: gNMIc gives a match without
// subscriptions every subscription it knows (another Pipeline's, feeding that Pipeline's outputs), and a payload
// with matches and no subscription at all is refused with a 400 for every Pipeline of the pod.
func TestTunnelMatchesTravelOnlyWithTheirPipelinesSubscriptions(t *testing.T) {
	g := NewWithT(t)
	s := baseSnapshot()
	s.Outputs = append(s.Outputs, markedOutput("out-a", v1.OutputFile), markedOutput("out-t", v1.OutputKafka))
	s.TunnelTargetPolicies = []v1.TunnelTargetPolicy{tunnelPolicy("leafs"), tunnelPolicy("spines")}
	tunnelOnly := pipeline("t", v1.PipelineSpec{Enabled: true, TunnelTargetPolicyRefs: []string{"leafs"},
		Outputs: v1.PipelineOutputs{OutputRefs: []string{"out-t"}}})

	// Alone in the Cluster: no match, so the payload is one gNMIc accepts.
	s.Pipelines = []v1.GnmicPipeline{tunnelOnly}
	req := pushThroughGNMIcPlan(g, Build(s))
	g.Expect(req.TunnelTargetMatches).To(BeEmpty())

	// Next to a Pipeline with a subscription: still no match of its own, so nothing of a's reaches out-t through
	// tunnel targets; a complete tunnel Pipeline keeps its match with its own subscriptions and outputs.
	s.Pipelines = []v1.GnmicPipeline{tunnelOnly,
		pipeline("a", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"ifaces"},
			Outputs: v1.PipelineOutputs{OutputRefs: []string{"out-a"}}}),
		pipeline("s", v1.PipelineSpec{Enabled: true, TunnelTargetPolicyRefs: []string{"spines"}, SubscriptionRefs: []string{"bgp"},
			Outputs: v1.PipelineOutputs{OutputRefs: []string{"out-t"}}}),
	}
	p := Build(s)
	req = pushThroughGNMIcPlan(g, p)
	g.Expect(req.TunnelTargetMatches).To(HaveLen(1))
	g.Expect(req.TunnelTargetMatches).To(HaveKey("lab/spines"))
	m := req.TunnelTargetMatches["lab/spines"]
	g.Expect(m.Config.Subscriptions).To(Equal([]string{SubscriptionName("lab", "s", "bgp")}))
	g.Expect(m.Config.Outputs).To(Equal([]string{"lab/out-t"}))
	g.Expect(p.Pipelines["lab/t"].SkippedTunnelTargetPolicies).To(Equal([]string{"lab/leafs"}))
}
