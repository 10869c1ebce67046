package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CollectorFinalizer lets the controller remove the remote attributes it owns before the CR goes away.
const CollectorFinalizer = "collector.fleetmanagement.grafana.com/finalizer"

// A collector ID is claimed by one Collector cluster-wide (the oldest); any other Collector naming it is Conflicted
// and makes no Fleet call.
const (
	ConditionConflicted = "Conflicted"
	// ReasonIDClaimed: another Collector holds the collector ID.
	ReasonIDClaimed = "CollectorIDClaimed"
	// ReasonIDHeld: this Collector holds its collector ID.
	ReasonIDHeld = "CollectorIDHeld"
)

// MaxRemoteAttributes is how many remote attributes one Collector may set; MaxAttributeValueLength caps a value.
const (
	MaxRemoteAttributes     = 100
	MaxAttributeValueLength = 1024
	// ReservedAttributePrefix starts the attribute keys Fleet Management reserves for itself.
	ReservedAttributePrefix = "collector."
)

// CollectorType is the kind of collector Fleet Management reports.
type CollectorType string

// The collector types.
const (
	CollectorTypeAlloy       CollectorType = "Alloy"
	CollectorTypeOTel        CollectorType = "OpenTelemetryCollector"
	CollectorTypeUnspecified CollectorType = "Unspecified"
)

// OwnerKind is the kind of object that set a remote attribute.
// +kubebuilder:validation:Enum=Collector;RemoteAttributePolicy;ExternalAttributeSync
type OwnerKind string

// The kinds that can own a remote attribute.
const (
	OwnerCollector             OwnerKind = "Collector"
	OwnerRemoteAttributePolicy OwnerKind = "RemoteAttributePolicy"
	OwnerExternalAttributeSync OwnerKind = "ExternalAttributeSync"
)

// CollectorSpec manages one collector registered with Fleet Management. The collector registers itself; the
// CR sets its display name, whether it is enabled and its remote attributes.
type CollectorSpec struct {
	// ID is the collector's Fleet Management ID; it cannot change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.id is immutable"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Collector ID"
	ID string `json:"id"`

	// Name is the collector's display name in Fleet Management; empty leaves it as it is.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Name"
	Name string `json:"name,omitempty"`

	// Enabled turns remote configuration for the collector on or off; unset leaves it as it is.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Enabled"
	Enabled *bool `json:"enabled,omitempty"`

	// RemoteAttributes are set on the collector in Fleet Management (they select pipelines). Keys must be
	// non-empty and must not start with "collector." (reserved); values are at most 1024 characters.
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Remote Attributes"
	RemoteAttributes map[string]string `json:"remoteAttributes,omitempty"`
}

// AttributeOwner records which object set one remote attribute, so only its owner ever removes it.
type AttributeOwner struct {
	// Key is the attribute key.
	Key string `json:"key"`
	// OwnerKind is the kind of the owning object.
	OwnerKind OwnerKind `json:"ownerKind"`
	// OwnerName is the owner as namespace/name.
	OwnerName string `json:"ownerName"`
	// Value is the value the owner set.
	// +optional
	Value string `json:"value,omitempty"`
}

// CollectorStatus is what Fleet Management reports for the collector.
type CollectorStatus struct {
	// ObservedGeneration is the generation of the spec last synced.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Registered is true once the collector exists in Fleet Management.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Registered"
	Registered bool `json:"registered"`
	// LastPing is the last time Fleet Management recorded an update from or for the collector.
	// +optional
	LastPing *metav1.Time `json:"lastPing,omitempty"`
	// Name is the display name Fleet Management reports.
	// +optional
	Name string `json:"name,omitempty"`
	// Enabled is whether Fleet Management serves the collector remote configuration.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// CollectorType is Alloy, OpenTelemetryCollector or Unspecified.
	// +optional
	CollectorType CollectorType `json:"collectorType,omitempty"`
	// CreatedAt is when the collector registered.
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
	// UpdatedAt is when Fleet Management last updated the collector.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
	// MarkedInactiveAt is when Fleet Management marked the collector inactive.
	// +optional
	MarkedInactiveAt *metav1.Time `json:"markedInactiveAt,omitempty"`
	// LocalAttributes are the attributes the collector reports about itself.
	// +optional
	LocalAttributes map[string]string `json:"localAttributes,omitempty"`
	// EffectiveRemoteAttributes are the remote attributes after precedence (ExternalAttributeSync, then this
	// Collector's spec, then RemoteAttributePolicies).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Effective Remote Attributes"
	EffectiveRemoteAttributes map[string]string `json:"effectiveRemoteAttributes,omitempty"`
	// AttributeOwners says which object set each effective remote attribute.
	// +optional
	// +listType=map
	// +listMapKey=key
	AttributeOwners []AttributeOwner `json:"attributeOwners,omitempty"`
	// Conditions: Ready and Synced.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Collector is a Grafana Fleet Management collector whose name, enabled flag and remote attributes are managed
// from Kubernetes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fmcol,categories={fleet}
// +kubebuilder:printcolumn:name="ID",type=string,JSONPath=`.spec.id`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.status.collectorType`
// +kubebuilder:printcolumn:name="Registered",type=boolean,JSONPath=`.status.registered`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Fleet Collector",resources={{Secret,v1,""},{Event,v1,""}}
type Collector struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec CollectorSpec `json:"spec"`
	// +optional
	Status CollectorStatus `json:"status,omitempty"`
}

// CollectorList is a list of Collectors.
// +kubebuilder:object:root=true
type CollectorList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Collector `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &Collector{}, &CollectorList{})
}
