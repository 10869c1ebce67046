package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Connection states reported in Target status.
const (
	// ConnectionStateReady means every cluster that holds the target reports it running and READY.
	ConnectionStateReady = "READY"
	// ConnectionStateDegraded means at least one cluster reports the target not running or not READY.
	ConnectionStateDegraded = "DEGRADED"
)

// Target condition types and reasons.
const (
	// TargetConditionProfileResolved tells whether spec.profile names an existing TargetProfile.
	TargetConditionProfileResolved = "ProfileResolved"
	// ReasonProfileFound is the ProfileResolved reason when the TargetProfile exists.
	ReasonProfileFound = "ProfileFound"
	// ReasonProfileNotFound is the ProfileResolved reason when the TargetProfile does not exist.
	ReasonProfileNotFound = "ProfileNotFound"
	// TargetConditionReady is True when the profile resolves and every cluster holding the target reports it
	// running with a READY connection.
	TargetConditionReady = "Ready"
	// ReasonTargetConnected is the Ready reason when every cluster holding the target has it running and READY.
	ReasonTargetConnected = "Connected"
	// ReasonTargetNotCollected is the Ready reason when no cluster holds the target yet: no enabled GnmicPipeline
	// selects it, or its Cluster has not placed it on a collector.
	ReasonTargetNotCollected = "NotCollected"
	// ReasonTargetDegraded is the Ready reason when a cluster holding the target reports it not running or not READY.
	ReasonTargetDegraded = "Degraded"
)

// TargetSpec describes one network device reachable over gNMI.
type TargetSpec struct {
	// Address is the device's gNMI endpoint as host:port, with a port from 1 to 65535. The host may be a DNS
	// name, an IPv4 address or a bracketed IPv6 address ([2001:db8::1]:57400).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Address"
	Address string `json:"address"`

	// Profile is the name of the TargetProfile, in the same namespace, that holds the connection settings
	// (credentials, TLS, timeouts, encoding) used to reach this device.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Profile"
	Profile string `json:"profile"`
}

// ClusterTargetState is what one gNMIc collector cluster reports about a target it holds.
type ClusterTargetState struct {
	// Pod is the collector pod the target is placed on, e.g. gnmic-core-1.
	// +optional
	Pod string `json:"pod,omitempty"`
	// State is the collector's run state for the target (e.g. running, stopped, failed).
	// +optional
	State string `json:"state,omitempty"`
	// FailedReason is the collector's explanation when the target is not running.
	// +optional
	FailedReason string `json:"failedReason,omitempty"`
	// ConnectionState is the gRPC connectivity state of the collector's connection (e.g. READY, CONNECTING).
	// +optional
	ConnectionState string `json:"connectionState,omitempty"`
	// Subscriptions maps each subscription name to its state on this collector.
	// +optional
	Subscriptions map[string]string `json:"subscriptions,omitempty"`
	// LastUpdated is when the collector last reported a change for this target.
	// +optional
	LastUpdated *metav1.Time `json:"lastUpdated,omitempty"`
}

// TargetStatus is the observed state of a Target.
type TargetStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Clusters is how many gNMIc collector clusters hold this target.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Clusters"
	Clusters int32 `json:"clusters,omitempty"`

	// ConnectionState is READY when every cluster holding the target reports it running and READY, DEGRADED when
	// any does not, and empty while no cluster holds it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Connection State"
	ConnectionState string `json:"connectionState,omitempty"`

	// ClusterStates is keyed by Cluster name and written by the Cluster controller.
	// +optional
	ClusterStates map[string]ClusterTargetState `json:"clusterStates,omitempty"`

	// Conditions: ProfileResolved; Ready (Connected, or NotCollected, Degraded, ProfileNotFound).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Target is one network device that gNMIc collectors subscribe to. Targets are written by hand or discovered
// by a TargetSource, selected by Pipelines, and pushed by the Cluster controller to gNMIc collectors.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gntgt,categories={gnmic}
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Profile",type=string,JSONPath=`.spec.profile`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusters`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.connectionState`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMI Target",resources={{TargetProfile,v1alpha1,""},{Event,v1,""}}
type Target struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TargetSpec `json:"spec"`
	// +optional
	Status TargetStatus `json:"status,omitempty"`
}

// TargetList is a list of Targets.
// +kubebuilder:object:root=true
type TargetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Target `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Target{}, &TargetList{})
}
