package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConflictPolicy says what a discovery does when the derived CR name is taken.
// +kubebuilder:validation:Enum=Skip
type ConflictPolicy string

// ConflictSkip leaves the existing CR alone and reports the conflict.
const ConflictSkip ConflictPolicy = "Skip"

// CollectorDiscoveryPolicy says what happens to discovered Collectors over time.
type CollectorDiscoveryPolicy struct {
	// OnCollectorRemoved is Keep (mark the CR stale) or Delete (delete the CR) when the collector leaves the
	// discovery's result. Delete only deletes the CR of a collector gone from Fleet; one that merely left the
	// selection is marked stale.
	// +optional
	// +kubebuilder:default=Keep
	OnCollectorRemoved RemovalPolicy `json:"onCollectorRemoved,omitempty"`
	// OnConflict is Skip: a CR with the derived name that this discovery did not create is left alone and
	// reported in status.conflicts.
	// +optional
	// +kubebuilder:default=Skip
	OnConflict ConflictPolicy `json:"onConflict,omitempty"`
}

// CollectorDiscoverySpec creates a Collector CR for every Fleet collector the selector matches.
type CollectorDiscoverySpec struct {
	// PollInterval is how often Fleet is listed (at least 1m). A spec change polls at once.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('60s')",message="spec.pollInterval must be at least 1m"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Poll Interval"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
	// Selector picks the collectors. Only the matchers are sent to Fleet; collectorIDs are ORed in on the
	// operator's side (which then lists every collector). An empty selector discovers every collector.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Selector"
	Selector PolicySelector `json:"selector,omitempty"`
	// TargetNamespace receives the Collector CRs; empty is the discovery's own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target Namespace"
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// IncludeInactive also imports collectors Fleet marked inactive.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Include Inactive"
	IncludeInactive bool `json:"includeInactive,omitempty"`
	// Policy for removed collectors and name conflicts.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Policy"
	Policy CollectorDiscoveryPolicy `json:"policy,omitempty"`
}

// CollectorDiscoveryConflict is a Fleet collector the discovery could not import.
type CollectorDiscoveryConflict struct {
	// CollectorID is the Fleet collector ID.
	CollectorID string `json:"collectorID"`
	// CRName is the Collector name the discovery derived.
	// +optional
	CRName string `json:"crName,omitempty"`
	// Reason is NotOwnedByDiscovery, OwnedByOtherDiscovery, NameSanitizationFailed or CreateFailed.
	Reason ConflictReason `json:"reason"`
	// Message explains the conflict.
	// +optional
	Message string `json:"message,omitempty"`
}

// CollectorDiscoveryStatus reports the last poll.
type CollectorDiscoveryStatus struct {
	DiscoveryStatus `json:",inline"`
	// CollectorsObserved is how many Fleet collectors matched at the last successful poll.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed"
	CollectorsObserved int32 `json:"collectorsObserved,omitempty"`
	// CollectorsManaged is how many Collector CRs this discovery created and still labels (stale included).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Managed"
	CollectorsManaged int32 `json:"collectorsManaged,omitempty"`
	// StaleCollectors is how many of them are marked stale.
	// +optional
	StaleCollectors int32 `json:"staleCollectors,omitempty"`
	// Conflicts are the collectors that could not be imported, sorted by ID (at most 100; see
	// TruncatedConflicts).
	// +optional
	// +listType=map
	// +listMapKey=collectorID
	// +kubebuilder:validation:MaxItems=100
	Conflicts []CollectorDiscoveryConflict `json:"conflicts,omitempty"`
}

// CollectorDiscovery creates Collector CRs for the Fleet Management collectors its selector matches, on a poll
// interval. It needs the Collector controller.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fmcd,categories={fleet}
// +kubebuilder:printcolumn:name="Poll",type=string,JSONPath=`.spec.pollInterval`
// +kubebuilder:printcolumn:name="Observed",type=integer,JSONPath=`.status.collectorsObserved`
// +kubebuilder:printcolumn:name="Managed",type=integer,JSONPath=`.status.collectorsManaged`
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Fleet Collector Discovery",resources={{Collector,v1alpha1,""},{Event,v1,""}}
type CollectorDiscovery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CollectorDiscoverySpec `json:"spec"`
	// +optional
	Status CollectorDiscoveryStatus `json:"status,omitempty"`
}

// CollectorDiscoveryList is a list of CollectorDiscoveries.
// +kubebuilder:object:root=true
type CollectorDiscoveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CollectorDiscovery `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &CollectorDiscovery{}, &CollectorDiscoveryList{})
}
