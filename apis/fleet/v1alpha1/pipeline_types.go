package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigType is the configuration language of a Pipeline's contents.
// +kubebuilder:validation:Enum=Alloy;OpenTelemetryCollector
type ConfigType string

// The configuration languages Fleet Management accepts.
const (
	ConfigTypeAlloy ConfigType = "Alloy"
	ConfigTypeOTel  ConfigType = "OpenTelemetryCollector"
)

// SourceType says where a Pipeline was last updated from.
// +kubebuilder:validation:Enum=Git;Terraform;Grafana;Kubernetes;Unspecified
type SourceType string

// The pipeline source types. Kubernetes is deprecated and never sent to Fleet Management.
const (
	SourceTypeGit         SourceType = "Git"
	SourceTypeTerraform   SourceType = "Terraform"
	SourceTypeGrafana     SourceType = "Grafana"
	SourceTypeKubernetes  SourceType = "Kubernetes"
	SourceTypeUnspecified SourceType = "Unspecified"
)

// Pipeline annotations and labels.
const (
	// AnnotationImportMode is read-only or adopt. read-only pipelines are never written or deleted in Fleet.
	AnnotationImportMode = "fleetmanagement.grafana.com/import-mode"
	// ImportModeReadOnly mirrors a Fleet pipeline without ever writing it.
	ImportModeReadOnly = "read-only"
	// ImportModeAdopt takes over a Fleet pipeline of the same name.
	ImportModeAdopt = "adopt"
	// AnnotationFleetPipelineID records the Fleet ID of a discovered pipeline. It is informational: the
	// controller never deletes by it (only by status.id, which only the controller writes).
	AnnotationFleetPipelineID = "fleetmanagement.grafana.com/fleet-pipeline-id"
	// AnnotationPipelineDiscoveredBy names the PipelineDiscovery (ns/name) that created the CR.
	AnnotationPipelineDiscoveredBy = "fleetmanagement.grafana.com/pipeline-discovered-by"
	// AnnotationPipelineDiscoveryStale is "true" once the discovered pipeline vanished from Fleet.
	AnnotationPipelineDiscoveryStale = "fleetmanagement.grafana.com/pipeline-discovery-stale"
	// AnnotationNameScope overrides --pipeline-name-scope for one Pipeline: namespace or none.
	AnnotationNameScope = "fleetmanagement.grafana.com/name-scope"
	// LabelPipelineDiscoveryName and LabelPipelineDiscoveryNamespace name the PipelineDiscovery that created
	// the CR.
	LabelPipelineDiscoveryName      = "fleetmanagement.grafana.com/pipeline-discovery-name"
	LabelPipelineDiscoveryNamespace = "fleetmanagement.grafana.com/pipeline-discovery-namespace"
	// PipelineFinalizer lets the controller delete the Fleet pipeline before the CR goes away.
	PipelineFinalizer = "pipeline.fleetmanagement.grafana.com/finalizer"
)

// Name scopes for Pipelines (the --pipeline-name-scope flag and the name-scope annotation).
const (
	// NameScopeNone sends the Pipeline's name as is: Fleet pipeline names are global to the stack, so two
	// namespaces using the same name collide (the controller reports it and syncs only one).
	NameScopeNone = "none"
	// NameScopeNamespace prefixes the name with "<namespace>." so namespaces never collide.
	NameScopeNamespace = "namespace"
)

// Condition types and reasons of the fleet group.
const (
	ConditionReady  = "Ready"
	ConditionSynced = "Synced"

	ReasonSynced          = "Synced"
	ReasonSyncFailed      = "SyncFailed"
	ReasonValidationError = "ValidationError"
	ReasonDeleteFailed    = "DeleteFailed"
	ReasonReadOnly        = "ReadOnly"
	ReasonRateLimited     = "RateLimited"
	ReasonPaused          = "Paused"
	ReasonNameCollision   = "NameCollision"
	// ReasonNameTaken: a Fleet pipeline of this name exists that the CR neither created nor was told to adopt.
	ReasonNameTaken     = "NameTaken"
	ReasonNotRegistered = "NotRegistered"
	// ReasonGrafanaManaged: the Fleet pipeline of this name is Grafana-sourced (made in the Grafana UI); it is never
	// adopted, whatever the import-mode annotation says.
	ReasonGrafanaManaged = "GrafanaManaged"
	// ReasonOwnedElsewhere: the Fleet pipeline of this name carries the ownership marker of another Pipeline CR (of
	// this cluster or another); it is never adopted.
	ReasonOwnedElsewhere = "OwnedElsewhere"
	// ReasonPipelineGone: a discovered Pipeline that never owned its Fleet pipeline found it deleted; a discovered
	// CR only adopts, it never creates the pipeline again.
	ReasonPipelineGone = "PipelineGone"
	// ReasonDiscoveryGone: a read-only Pipeline's discovery, which alone refreshes it, no longer exists; Ready is
	// Unknown because the mirrored status is frozen.
	ReasonDiscoveryGone = "DiscoveryGone"
)

// PipelineSource says where a pipeline was last updated from.
type PipelineSource struct {
	// Type of the source. Kubernetes is deprecated and never sent; Grafana-sourced pipelines are never deleted
	// from Fleet when the CR is deleted.
	// +optional
	// +kubebuilder:default=Unspecified
	Type SourceType `json:"type,omitempty"`
	// Namespace identifies the particular source (e.g. a repository); required for Git, Terraform and Grafana,
	// empty for Unspecified.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace,omitempty"`
}

// PipelineSpec is a Fleet Management pipeline: a configuration snippet assigned to collectors by matchers.
// +kubebuilder:validation:XValidation:rule="!has(self.source) || !has(self.source.type) || self.source.type == 'Unspecified' || self.source.type == 'Kubernetes' || (has(self.source.namespace) && size(self.source.namespace) > 0)",message="spec.source.namespace is required for Git, Terraform and Grafana sources"
type PipelineSpec struct {
	// Name of the pipeline in Fleet Management; defaults to metadata.name. Fleet names are global to the
	// stack (see the name-scope annotation and --pipeline-name-scope).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[^\s\x00-\x1f\x7f]*$`
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Name"
	Name string `json:"name,omitempty"`

	// Contents is the pipeline configuration, in the language given by configType.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Contents"
	Contents string `json:"contents"`

	// Matchers select the collectors that run this pipeline (Prometheus Alertmanager matcher syntax, e.g.
	// env="prod" or team=~"a|b"). They are ANDed; none matches no collector.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=200
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Matchers"
	Matchers []string `json:"matchers,omitempty"`

	// Enabled says whether collectors receive the pipeline.
	// +optional
	// +kubebuilder:default=true
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled"
	Enabled *bool `json:"enabled,omitempty"`

	// ConfigType is the language of contents: Alloy or OpenTelemetryCollector.
	// +optional
	// +kubebuilder:default=Alloy
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Config Type"
	ConfigType ConfigType `json:"configType,omitempty"`

	// Source says where the pipeline was last updated from.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Source"
	Source *PipelineSource `json:"source,omitempty"`

	// Paused stops every Fleet call for this pipeline (no upsert, no delete) until it is unset.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Paused"
	Paused bool `json:"paused,omitempty"`
}

// PipelineStatus is what Fleet Management reported for the pipeline at the last sync.
type PipelineStatus struct {
	// ObservedGeneration is the generation of the spec last synced.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// ID is the Fleet pipeline ID, written only by the controller; deletes use only this.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Fleet ID"
	ID string `json:"id,omitempty"`
	// CreatedAt is when Fleet Management created the pipeline.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
	// UpdatedAt is when Fleet Management last updated the pipeline.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
	// Source is the source type Fleet Management reports for the pipeline.
	// +optional
	Source string `json:"source,omitempty"`
	// ContentsHash is the hex sha256 of the contents Fleet Management holds for the pipeline.
	// +optional
	ContentsHash string `json:"contentsHash,omitempty"`
	// Enabled is the enabled flag Fleet Management holds for the pipeline.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// OrphanedPipelineIDs are pipelines this CR created under an earlier name whose delete failed after a rename;
	// the controller retries deleting them and drops each once it is gone.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	OrphanedPipelineIDs []string `json:"orphanedPipelineIDs,omitempty"`
	// OwnershipEstablished is set once this CR has created or adopted its Fleet pipeline. From then on the
	// ownership marker alone decides which pipeline is its own: import-mode adopt has acted and never takes over
	// another pipeline (one made after the original was deleted, say).
	// +optional
	OwnershipEstablished bool `json:"ownershipEstablished,omitempty"`
	// SyncedName is the name the pipeline has in Fleet Management (spec.name, or metadata.name, with the
	// namespace prefix under the namespace name scope).
	// +optional
	SyncedName string `json:"syncedName,omitempty"`
	// Conditions: Ready and Synced.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Pipeline is a Grafana Fleet Management pipeline kept in sync from Kubernetes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fmp,categories={fleet}
// +kubebuilder:printcolumn:name="Enabled",type=boolean,JSONPath=`.spec.enabled`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Config Type",type=string,JSONPath=`.spec.configType`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source.type`
// +kubebuilder:printcolumn:name="Fleet ID",type=string,JSONPath=`.status.id`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Fleet Pipeline",resources={{Secret,v1,""},{Event,v1,""}}
type Pipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PipelineSpec `json:"spec"`
	// +optional
	Status PipelineStatus `json:"status,omitempty"`
}

// PipelineList is a list of Pipelines.
// +kubebuilder:object:root=true
type PipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Pipeline `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Pipeline{}, &PipelineList{})
}
