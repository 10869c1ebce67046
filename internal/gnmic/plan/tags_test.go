package plan

import (
	"testing"

	. "github.com/onsi/gomega"

	v1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// A target shared by Pipelines carries each Pipeline's labels only on that Pipeline's data path: the labels are an
// event-add-tag processor of the Pipeline, limited to the Pipeline's own subscription instances (gNMIc tags every
// event with its subscription-name) and run first on the Pipeline's outputs; the target's event-tags hold none of
// them. A shared output keeps its name (no split) and runs each Pipeline's processor, which touches only that
// Pipeline's events.
func TestPipelineLabelsStayOnTheirPipelinesDataPath(t *testing.T) {
	g := NewWithT(t)
	s := baseSnapshot()
	s.Outputs = []v1.Output{markedOutput("out-a", v1.OutputFile), markedOutput("out-b", v1.OutputKafka), markedOutput("shared", v1.OutputNATS)}
	a := pipeline("a", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"ifaces"},
		Outputs: v1.PipelineOutputs{OutputRefs: []string{"out-a", "shared"}}})
	a.Spec.Labels = map[string]string{"team": "a", "tier": "gold"}
	b := pipeline("b", v1.PipelineSpec{Enabled: true, TargetRefs: []string{"r1"}, SubscriptionRefs: []string{"bgp"},
		Outputs: v1.PipelineOutputs{OutputRefs: []string{"out-b", "shared"}}})
	b.Spec.Labels = map[string]string{"team": "b"}
	s.Pipelines = []v1.GnmicPipeline{a, b}
	req := pushThroughGNMIcPlan(g, Build(s))

	g.Expect(req.Targets["lab/r1"].EventTags).NotTo(HaveKey("team"))
	g.Expect(req.Targets["lab/r1"].EventTags).NotTo(HaveKey("tier"))
	g.Expect(req.Targets["lab/r1"].EventTags).To(HaveKeyWithValue("site", "lab"), "the profile's labels are the target's own")

	g.Expect(req.Processors["lab/a/labels"]).To(HaveKey("event-add-tag"))
	tagsA, _ := req.Processors["lab/a/labels"]["event-add-tag"].(map[string]any)
	tagsB, _ := req.Processors["lab/b/labels"]["event-add-tag"].(map[string]any)
	g.Expect(tagsA["add"]).To(Equal(map[string]any{"team": "a", "tier": "gold"}))
	g.Expect(tagsA["overwrite"]).To(BeTrue())
	g.Expect(tagsA["condition"]).To(Equal(`(.tags["subscription-name"] // "") | startswith("lab/a/")`))
	g.Expect(tagsB["add"]).To(Equal(map[string]any{"team": "b"}))
	g.Expect(tagsB["condition"]).To(Equal(`(.tags["subscription-name"] // "") | startswith("lab/b/")`))

	g.Expect(req.Outputs["lab/out-a"]["event-processors"]).To(BeEquivalentTo([]any{"lab/a/labels"}))
	g.Expect(req.Outputs["lab/out-b"]["event-processors"]).To(BeEquivalentTo([]any{"lab/b/labels"}))
	g.Expect(req.Outputs["lab/shared"]["event-processors"]).To(BeEquivalentTo([]any{"lab/a/labels", "lab/b/labels"}))
	for name := range req.Subscriptions {
		g.Expect(name).To(Or(HavePrefix("lab/a/"), HavePrefix("lab/b/")), "each subscription instance is named after its Pipeline")
	}
}
