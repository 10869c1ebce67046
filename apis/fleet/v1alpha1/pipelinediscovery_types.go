package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DiscoveryImportMode says how discovered Pipelines are managed.
// +kubebuilder:validation:Enum=Adopt;ReadOnly
type DiscoveryImportMode string

// The import modes.
const (
	// DiscoveryAdopt creates Pipelines with import-mode adopt: from then on the CR is the source of truth and the
	// Pipeline controller writes it to Fleet (deleting the CR deletes the Fleet pipeline).
	DiscoveryAdopt DiscoveryImportMode = "Adopt"
	// DiscoveryReadOnly creates Pipelines with import-mode read-only: they mirror Fleet on every poll and are
	// never written or deleted in Fleet.
	DiscoveryReadOnly DiscoveryImportMode = "ReadOnly"
)

// PipelineDiscoverySelector filters the Fleet pipelines imported; unset fields do not filter.
type PipelineDiscoverySelector struct {
	// ConfigType imports only pipelines of this configuration language.
	// +optional
	ConfigType *ConfigType `json:"configType,omitempty"`
	// Enabled imports only enabled (true) or only disabled (false) pipelines.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// PipelineDiscoveryPolicy says what happens to imported Pipelines over time.
type PipelineDiscoveryPolicy struct {
	// OnPipelineRemoved is Keep (mark the CR stale) or Delete (delete the CR) when its Fleet pipeline is gone.
	// A pipeline that still exists but no longer matches the selector is only marked stale: deleting an
	// adopted CR would delete the pipeline in Fleet.
	// +optional
	// +kubebuilder:default=Keep
	OnPipelineRemoved RemovalPolicy `json:"onPipelineRemoved,omitempty"`
}

// PipelineDiscoverySpec imports Fleet Management pipelines as Pipeline CRs.
type PipelineDiscoverySpec struct {
	// PollInterval is how often Fleet is listed (at least 1m). A spec change polls at once.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('60s')",message="spec.pollInterval must be at least 1m"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Poll Interval"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
	// Selector filters the pipelines imported.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Selector"
	Selector PipelineDiscoverySelector `json:"selector,omitempty"`
	// TargetNamespace receives the Pipeline CRs; empty is the discovery's own namespace. Another namespace needs
	// the right to create Pipelines there when cross-namespace authorization is enforced.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target Namespace"
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// ImportMode is Adopt (the CR takes over the Fleet pipeline) or ReadOnly (the CR mirrors it). Grafana-sourced
	// pipelines are always imported read-only.
	// +optional
	// +kubebuilder:default=Adopt
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Import Mode"
	ImportMode DiscoveryImportMode `json:"importMode,omitempty"`
	// Policy for pipelines that disappear.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Policy"
	Policy PipelineDiscoveryPolicy `json:"policy,omitempty"`
}

// PipelineDiscoveryConflict is a Fleet pipeline the discovery could not import.
type PipelineDiscoveryConflict struct {
	// PipelineID is the Fleet pipeline ID.
	PipelineID string `json:"pipelineID"`
	// CRName is the Pipeline name the discovery derived.
	// +optional
	CRName string `json:"crName,omitempty"`
	// Reason is NotOwnedByDiscovery, OwnedByOtherDiscovery, NameSanitizationFailed or CreateFailed.
	Reason ConflictReason `json:"reason"`
	// Message explains the conflict.
	// +optional
	Message string `json:"message,omitempty"`
}

// PipelineDiscoveryStatus reports the last poll.
type PipelineDiscoveryStatus struct {
	DiscoveryStatus `json:",inline"`
	// PipelinesObserved is how many Fleet pipelines matched the selector at the last successful poll.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed"
	PipelinesObserved int32 `json:"pipelinesObserved,omitempty"`
	// PipelinesManaged is how many Pipeline CRs this discovery created and still labels (stale ones included).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Managed"
	PipelinesManaged int32 `json:"pipelinesManaged,omitempty"`
	// StalePipelines is how many of them are marked stale.
	// +optional
	StalePipelines int32 `json:"stalePipelines,omitempty"`
	// Conflicts are the pipelines that could not be imported, sorted by ID (at most 100; see
	// TruncatedConflicts).
	// +optional
	// +listType=map
	// +listMapKey=pipelineID
	// +kubebuilder:validation:MaxItems=100
	Conflicts []PipelineDiscoveryConflict `json:"conflicts,omitempty"`
}

// PipelineDiscovery imports the pipelines of a Fleet Management stack as Pipeline CRs, on a poll interval.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fmpd,categories={fleet}
// +kubebuilder:printcolumn:name="Poll",type=string,JSONPath=`.spec.pollInterval`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.importMode`
// +kubebuilder:printcolumn:name="Observed",type=integer,JSONPath=`.status.pipelinesObserved`
// +kubebuilder:printcolumn:name="Managed",type=integer,JSONPath=`.status.pipelinesManaged`
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Fleet Pipeline Discovery",resources={{Pipeline,v1alpha1,""},{Event,v1,""}}
type PipelineDiscovery struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PipelineDiscoverySpec `json:"spec"`
	// +optional
	Status PipelineDiscoveryStatus `json:"status,omitempty"`
}

// PipelineDiscoveryList is a list of PipelineDiscoveries.
// +kubebuilder:object:root=true
type PipelineDiscoveryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PipelineDiscovery `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &PipelineDiscovery{}, &PipelineDiscoveryList{})
}
