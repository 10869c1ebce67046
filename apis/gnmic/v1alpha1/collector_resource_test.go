package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPipelineSpecReferences: each collector-configuration kind reads its own refs and selectors; Processors come
// from both the outputs' and the inputs' lists; an unknown kind references nothing.
func TestPipelineSpecReferences(t *testing.T) {
	sel := func(v string) []metav1.LabelSelector {
		return []metav1.LabelSelector{{MatchLabels: map[string]string{"k": v}}}
	}
	spec := PipelineSpec{
		SubscriptionRefs: []string{"s"}, SubscriptionSelectors: sel("s"),
		TunnelTargetPolicyRefs: []string{"t"}, TunnelTargetPolicySelectors: sel("t"),
		TargetRefs: []string{"target"}, TargetSelectors: sel("target"),
		Outputs: PipelineOutputs{OutputRefs: []string{"o"}, OutputSelectors: sel("o"),
			ProcessorRefs: []string{"po"}, ProcessorSelectors: sel("po")},
		Inputs: PipelineInputs{InputRefs: []string{"i"}, InputSelectors: sel("i"),
			ProcessorRefs: []string{"pi"}, ProcessorSelectors: sel("pi")},
	}
	for kind, tc := range map[string]struct {
		refs      []string
		selectors []metav1.LabelSelector
	}{
		"Subscription":       {[]string{"s"}, sel("s")},
		"Output":             {[]string{"o"}, sel("o")},
		"Input":              {[]string{"i"}, sel("i")},
		"Processor":          {[]string{"po", "pi"}, append(sel("po"), sel("pi")...)},
		"TunnelTargetPolicy": {[]string{"t"}, sel("t")},
		"Target":             {nil, nil},
	} {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			refs, selectors := spec.References(kind)
			g.Expect(refs).To(Equal(tc.refs))
			g.Expect(selectors).To(Equal(tc.selectors))
		})
	}
}
