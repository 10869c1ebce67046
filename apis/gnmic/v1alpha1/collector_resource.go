package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CollectorStatus gives the status controller one way into the status of every collector-configuration kind.
func (s *Subscription) CollectorStatus() *CollectorResourceStatus { return &s.Status }

// CollectorStatus gives the status controller one way into the status of every collector-configuration kind.
func (o *Output) CollectorStatus() *CollectorResourceStatus { return &o.Status }

// CollectorStatus gives the status controller one way into the status of every collector-configuration kind.
func (in *Input) CollectorStatus() *CollectorResourceStatus { return &in.Status }

// CollectorStatus gives the status controller one way into the status of every collector-configuration kind.
func (p *Processor) CollectorStatus() *CollectorResourceStatus { return &p.Status }

// CollectorStatus gives the status controller one way into the status of every collector-configuration kind.
func (t *TunnelTargetPolicy) CollectorStatus() *CollectorResourceStatus { return &t.Status }

// References returns what a Pipeline names of one collector-configuration kind ("Subscription", "Output",
// "Input", "Processor", "TunnelTargetPolicy"): the refs and the selectors. Processors come from both the outputs'
// and the inputs' lists. An unknown kind references nothing.
func (s *PipelineSpec) References(kind string) (refs []string, selectors []metav1.LabelSelector) {
	switch kind {
	case "Subscription":
		return s.SubscriptionRefs, s.SubscriptionSelectors
	case "Output":
		return s.Outputs.OutputRefs, s.Outputs.OutputSelectors
	case "Input":
		return s.Inputs.InputRefs, s.Inputs.InputSelectors
	case "Processor":
		refs = append(append(refs, s.Outputs.ProcessorRefs...), s.Inputs.ProcessorRefs...)
		selectors = append(append(selectors, s.Outputs.ProcessorSelectors...), s.Inputs.ProcessorSelectors...)
		return refs, selectors
	case "TunnelTargetPolicy":
		return s.TunnelTargetPolicyRefs, s.TunnelTargetPolicySelectors
	}
	return nil, nil
}
