package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pipeline condition types, reasons and status values.
const (
	PipelineConditionResourcesResolved = "ResourcesResolved"

	ReasonResolved         = "Resolved"
	ReasonMissingResources = "MissingResources"
	ReasonClusterNotFound  = "ClusterNotFound"
	ReasonDisabled         = "Disabled"
	ReasonPipelineReady    = "PipelineReady"
	// ReasonNoOutputs: the Pipeline resolves no Output, so nothing of it is collected (gNMIc would send its
	// targets' data to every output of the collector).
	ReasonNoOutputs = "NoOutputs"
	// ReasonUnsupportedByCollector: some selected object asks for something the Cluster's collectors cannot
	// decode (a Subscription's history; tunnel target policies before gNMIc 0.47); it is left out.
	ReasonUnsupportedByCollector = "UnsupportedByCollector"

	PipelineStatusActive     = "Active"
	PipelineStatusDisabled   = "Disabled"
	PipelineStatusIncomplete = "Incomplete"
)

// PipelineOutputs selects the Outputs a Pipeline's targets send to, and the Processors applied on the way.
type PipelineOutputs struct {
	// OutputSelectors select Outputs by label; an empty selector matches nothing.
	// +optional
	OutputSelectors []metav1.LabelSelector `json:"outputSelectors,omitempty"`
	// OutputRefs name Outputs in the Pipeline's namespace.
	// +optional
	OutputRefs []string `json:"outputRefs,omitempty"`
	// ProcessorSelectors select Processors by label, applied to the outputs.
	// +optional
	ProcessorSelectors []metav1.LabelSelector `json:"processorSelectors,omitempty"`
	// ProcessorRefs name Processors applied to the outputs, in order, before selected ones.
	// +optional
	ProcessorRefs []string `json:"processorRefs,omitempty"`
}

// PipelineInputs selects Inputs (which feed the Pipeline's outputs) and their Processors.
type PipelineInputs struct {
	// InputSelectors select Inputs by label; an empty selector matches nothing.
	// +optional
	InputSelectors []metav1.LabelSelector `json:"inputSelectors,omitempty"`
	// InputRefs name Inputs in the Pipeline's namespace.
	// +optional
	InputRefs []string `json:"inputRefs,omitempty"`
	// ProcessorSelectors select Processors by label, applied to the inputs.
	// +optional
	ProcessorSelectors []metav1.LabelSelector `json:"processorSelectors,omitempty"`
	// ProcessorRefs name Processors applied to the inputs.
	// +optional
	ProcessorRefs []string `json:"processorRefs,omitempty"`
}

// PipelineSpec wires Targets, Subscriptions, Outputs, Inputs and Processors into one collector Cluster. Every
// list is resolved the same way: refs first, then the union of what the selectors match; an empty selector
// matches nothing; only objects in the Pipeline's namespace are considered.
type PipelineSpec struct {
	// ClusterRef names the Cluster, in the same namespace, whose collectors run this Pipeline.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster"
	ClusterRef string `json:"clusterRef"`

	// Enabled turns the Pipeline on; it does nothing unless true.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Enabled bool `json:"enabled,omitempty"`

	// TargetSelectors select Targets by label.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target Selectors"
	TargetSelectors []metav1.LabelSelector `json:"targetSelectors,omitempty"`
	// TargetRefs name Targets.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target Refs"
	TargetRefs []string `json:"targetRefs,omitempty"`

	// TunnelTargetPolicySelectors select TunnelTargetPolicies by label.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Tunnel Target Policy Selectors"
	TunnelTargetPolicySelectors []metav1.LabelSelector `json:"tunnelTargetPolicySelectors,omitempty"`
	// TunnelTargetPolicyRefs name TunnelTargetPolicies.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Tunnel Target Policy Refs"
	TunnelTargetPolicyRefs []string `json:"tunnelTargetPolicyRefs,omitempty"`

	// SubscriptionSelectors select Subscriptions by label.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Subscription Selectors"
	SubscriptionSelectors []metav1.LabelSelector `json:"subscriptionSelectors,omitempty"`
	// SubscriptionRefs name Subscriptions.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Subscription Refs"
	SubscriptionRefs []string `json:"subscriptionRefs,omitempty"`

	// Outputs selects the Outputs and their Processors.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Outputs"
	Outputs PipelineOutputs `json:"outputs,omitempty"`

	// Inputs selects the Inputs and their Processors.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Inputs"
	Inputs PipelineInputs `json:"inputs,omitempty"`

	// Labels are added as event tags to every target of this Pipeline.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Labels"
	Labels map[string]string `json:"labels,omitempty"`
}

// PipelineStatus is the observed state of a Pipeline.
type PipelineStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Status is Active, Disabled or Incomplete (a referenced object or the Cluster is missing).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Status"
	Status string `json:"status,omitempty"`
	// TargetsCount is how many Targets the Pipeline resolves to.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Targets"
	// +optional
	TargetsCount int32 `json:"targetsCount"`
	// SubscriptionsCount is how many Subscriptions it resolves to.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Subscriptions"
	// +optional
	SubscriptionsCount int32 `json:"subscriptionsCount"`
	// InputsCount is how many Inputs it resolves to.
	// +optional
	InputsCount int32 `json:"inputsCount"`
	// OutputsCount is how many Outputs it resolves to.
	// +optional
	OutputsCount int32 `json:"outputsCount"`
	// TunnelTargetPoliciesCount is how many TunnelTargetPolicies it resolves to.
	// +optional
	TunnelTargetPoliciesCount int32 `json:"tunnelTargetPoliciesCount"`
	// Conditions: Ready, ResourcesResolved.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GnmicPipeline (the gNMIc Pipeline) selects Targets, Subscriptions, Outputs, Inputs, Processors and
// TunnelTargetPolicies and hands them to one Cluster.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gnmicpipelines,singular=gnmicpipeline,shortName=gnpl,categories={gnmic}
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef`
// +kubebuilder:printcolumn:name="Enabled",type=boolean,JSONPath=`.spec.enabled`
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targetsCount`
// +kubebuilder:printcolumn:name="Tunnel_Target_Policies",type=integer,JSONPath=`.status.tunnelTargetPoliciesCount`
// +kubebuilder:printcolumn:name="Subscriptions",type=integer,JSONPath=`.status.subscriptionsCount`
// +kubebuilder:printcolumn:name="Outputs",type=integer,JSONPath=`.status.outputsCount`
// +kubebuilder:printcolumn:name="Inputs",type=integer,JSONPath=`.status.inputsCount`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMIc Pipeline",resources={{Cluster,v1alpha1,""},{Target,v1alpha1,""},{Event,v1,""}}
type GnmicPipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PipelineSpec `json:"spec"`
	// +optional
	Status PipelineStatus `json:"status,omitempty"`
}

// GnmicPipelineList is a list of GnmicPipelines.
// +kubebuilder:object:root=true
type GnmicPipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GnmicPipeline `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &GnmicPipeline{}, &GnmicPipelineList{})
}
