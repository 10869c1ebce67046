package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SubscriptionMode is a gNMI subscription mode; STREAM may carry a stream mode after a slash.
// +kubebuilder:validation:Enum=ONCE;POLL;STREAM;STREAM/SAMPLE;STREAM/ON_CHANGE;STREAM/TARGET_DEFINED
type SubscriptionMode string

// The subscription modes.
const (
	SubscriptionModeOnce          SubscriptionMode = "ONCE"
	SubscriptionModePoll          SubscriptionMode = "POLL"
	SubscriptionModeStream        SubscriptionMode = "STREAM"
	SubscriptionModeSample        SubscriptionMode = "STREAM/SAMPLE"
	SubscriptionModeOnChange      SubscriptionMode = "STREAM/ON_CHANGE"
	SubscriptionModeTargetDefined SubscriptionMode = "STREAM/TARGET_DEFINED"
)

// SubscriptionModes lists every accepted mode.
var SubscriptionModes = []SubscriptionMode{SubscriptionModeOnce, SubscriptionModePoll, SubscriptionModeStream,
	SubscriptionModeSample, SubscriptionModeOnChange, SubscriptionModeTargetDefined}

// StreamMode is the mode of one stream subscription.
// +kubebuilder:validation:Enum=SAMPLE;ON_CHANGE;TARGET_DEFINED
type StreamMode string

// StreamSubscription is one entry of a STREAM subscription list with its own paths and mode.
type StreamSubscription struct {
	// Paths subscribed to.
	// +required
	// +kubebuilder:validation:MinItems=1
	Paths []string `json:"paths"`
	// Mode of the stream.
	// +optional
	Mode StreamMode `json:"mode,omitempty"`
	// SampleInterval for SAMPLE mode.
	// +optional
	SampleInterval *metav1.Duration `json:"sampleInterval,omitempty"`
	// HeartbeatInterval forces an update at least this often.
	// +optional
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`
	// SuppressRedundant sends only changed values in SAMPLE mode.
	// +optional
	SuppressRedundant bool `json:"suppressRedundant,omitempty"`
}

// SubscriptionHistory asks for historical data (gNMI history extension).
type SubscriptionHistory struct {
	// Snapshot requests the data as it was at this time.
	// +optional
	Snapshot *metav1.Time `json:"snapshot,omitempty"`
	// Start of a time range.
	// +optional
	Start *metav1.Time `json:"start,omitempty"`
	// End of a time range.
	// +optional
	End *metav1.Time `json:"end,omitempty"`
}

// SubscriptionSpec is one gNMI subscription, in gNMIc's terms.
type SubscriptionSpec struct {
	// Prefix common to every path.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Prefix"
	Prefix string `json:"prefix,omitempty"`
	// Target is the gNMI prefix target field.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target"
	Target string `json:"target,omitempty"`
	// Paths subscribed to; required unless streamSubscriptions is set.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paths"
	Paths []string `json:"paths,omitempty"`
	// Mode: ONCE, POLL, STREAM, STREAM/SAMPLE, STREAM/ON_CHANGE or STREAM/TARGET_DEFINED.
	// +optional
	// +kubebuilder:default=STREAM
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Mode"
	Mode SubscriptionMode `json:"mode,omitempty"`
	// SampleInterval for STREAM/SAMPLE.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Sample Interval"
	SampleInterval *metav1.Duration `json:"sampleInterval,omitempty"`
	// HeartbeatInterval forces an update at least this often.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Heartbeat Interval"
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`
	// UpdatesOnly skips the initial full snapshot.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Updates Only"
	UpdatesOnly bool `json:"updatesOnly,omitempty"`
	// StreamSubscriptions lists stream subscriptions with their own modes (STREAM only; excludes paths).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Stream Subscriptions"
	StreamSubscriptions []StreamSubscription `json:"streamSubscriptions,omitempty"`
	// Depth limits the depth of returned subtrees (gNMI depth extension); 0 means unlimited.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Depth"
	Depth uint32 `json:"depth,omitempty"`
	// Encoding overrides the TargetProfile encoding for this subscription.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Encoding"
	Encoding *Encoding `json:"encoding,omitempty"`
	// QoS is the DSCP marking asked of the device.
	// +optional
	// +kubebuilder:validation:Maximum=63
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="QoS"
	QoS *uint32 `json:"qos,omitempty"`
	// SuppressRedundant sends only changed values in SAMPLE mode.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Suppress Redundant"
	SuppressRedundant bool `json:"suppressRedundant,omitempty"`
	// History asks for historical data.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="History"
	History *SubscriptionHistory `json:"history,omitempty"`
}

// Subscription is a set of gNMI paths and how to subscribe to them; Pipelines attach it to their Targets.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gnmicsubscriptions,singular=gnmicsubscription,shortName=gnsub,categories={gnmic}
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="SampleInterval",type=string,JSONPath=`.spec.sampleInterval`
// +kubebuilder:printcolumn:name="Encoding",type=string,JSONPath=`.spec.encoding`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pipelines",type=integer,JSONPath=`.status.pipelinesCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMI Subscription",resources={{Cluster,v1alpha1,""}}
type Subscription struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec SubscriptionSpec `json:"spec,omitempty"`
	// +optional
	Status CollectorResourceStatus `json:"status,omitempty"`
}

// SubscriptionList is a list of Subscriptions.
// +kubebuilder:object:root=true
type SubscriptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Subscription `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Subscription{}, &SubscriptionList{})
}
