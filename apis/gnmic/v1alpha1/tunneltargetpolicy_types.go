package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TunnelTargetMatch selects tunnel targets by the type and ID they report; both are regular expressions.
type TunnelTargetMatch struct {
	// Type is a regular expression matched against the target type the device reports.
	// +optional
	Type string `json:"type,omitempty"`
	// ID is a regular expression matched against the target ID the device reports.
	// +optional
	ID string `json:"id,omitempty"`
}

// TunnelTargetPolicySpec says which devices dialling in through the gRPC tunnel become targets, and how the
// collector talks to them.
type TunnelTargetPolicySpec struct {
	// Match selects tunnel targets; required, and its id must name devices (an expression that matches the
	// empty string, or no match at all, would admit every device that dials in).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Match"
	Match *TunnelTargetMatch `json:"match,omitempty"`
	// Profile is the TargetProfile, in the same namespace, used for matching targets.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Profile"
	Profile string `json:"profile,omitempty"`
}

// TunnelTargetPolicy turns devices that dial into a Cluster's gRPC tunnel server into targets.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gnmictunneltargetpolicies,singular=gnmictunneltargetpolicy,shortName=gnttp,categories={gnmic}
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.match.type`
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.spec.match.id`
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pipelines",type=integer,JSONPath=`.status.pipelinesCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMIc Tunnel Target Policy",resources={{Cluster,v1alpha1,""},{TargetProfile,v1alpha1,""}}
type TunnelTargetPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TunnelTargetPolicySpec `json:"spec,omitempty"`
	// +optional
	Status CollectorResourceStatus `json:"status,omitempty"`
}

// TunnelTargetPolicyList is a list of TunnelTargetPolicies.
// +kubebuilder:object:root=true
type TunnelTargetPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TunnelTargetPolicy `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TunnelTargetPolicy{}, &TunnelTargetPolicyList{})
}
