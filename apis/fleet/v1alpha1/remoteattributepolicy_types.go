package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RemoteAttributePolicy limits and condition vocabulary.
const (
	// MaxMatchedCollectorIDs bounds status.matchedCollectorIDs; above it the list is cut and Truncated is True.
	MaxMatchedCollectorIDs = 1000

	ReasonMatched             = "Matched"
	ReasonNoMatch             = "NoMatch"
	ReasonListFailed          = "ListFailed"
	ReasonMatchedIDsTruncated = "MatchedIDsTruncated"
)

// RemoteAttributePolicySpec sets remote attributes on every Collector it selects in its namespace.
type RemoteAttributePolicySpec struct {
	// Selector picks the Collector CRs of this namespace the attributes apply to (at least one matcher or ID).
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Selector"
	Selector PolicySelector `json:"selector"`
	// Attributes to set: 1–100 keys, not starting with "collector.", values ≤1024 characters.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=100
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Attributes"
	Attributes map[string]string `json:"attributes"`
	// Priority orders policies setting the same key: the higher wins (ties: first by namespace/name). A
	// Collector's own spec and ExternalAttributeSyncs always win over policies.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Priority"
	Priority int32 `json:"priority,omitempty"`
}

// RemoteAttributePolicyStatus lists the collectors the policy matches.
type RemoteAttributePolicyStatus struct {
	// ObservedGeneration is the generation last evaluated.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// MatchedCollectorIDs are the IDs of the matched Collector CRs, sorted (at most 1000; see Truncated).
	// +optional
	// +listType=set
	MatchedCollectorIDs []string `json:"matchedCollectorIDs,omitempty"`
	// MatchedCount is how many Collector CRs match, including any cut from matchedCollectorIDs.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Matched"
	MatchedCount int32 `json:"matchedCount,omitempty"`
	// Conditions: Ready, Synced, Truncated.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RemoteAttributePolicy sets remote attributes on the Collectors of its namespace that its selector matches.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fmrap,categories={fleet}
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matchedCount`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Fleet Remote Attribute Policy",resources={{Event,v1,""},{Collector,v1alpha1,""}}
type RemoteAttributePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec RemoteAttributePolicySpec `json:"spec"`
	// +optional
	Status RemoteAttributePolicyStatus `json:"status,omitempty"`
}

// RemoteAttributePolicyList is a list of RemoteAttributePolicies.
// +kubebuilder:object:root=true
type RemoteAttributePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemoteAttributePolicy `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &RemoteAttributePolicy{}, &RemoteAttributePolicyList{})
}
