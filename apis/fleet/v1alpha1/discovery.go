package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Discovery limits, annotations, labels and condition vocabulary shared by PipelineDiscovery and
// CollectorDiscovery.
const (
	// MaxDiscoveryConflicts bounds status.conflicts; above it the list is cut and TruncatedConflicts is True.
	MaxDiscoveryConflicts = 100
	// DefaultPollInterval is spec.pollInterval when unset; MinPollInterval is its lower bound.
	DefaultPollInterval = 5 * time.Minute
	MinPollInterval     = time.Minute

	ConditionTruncatedConflicts = "TruncatedConflicts"

	ReasonDiscovered         = "Discovered"
	ReasonConflictsTruncated = "ConflictsTruncated"
	// ReasonEmptyResult (Stalled, Ready False): Fleet listed no objects at all while the discovery manages CRs;
	// nothing is created, deleted or marked until a poll lists something again.
	ReasonEmptyResult = "EmptyResult"
	// ReasonCRWriteFailed: the poll listed Fleet but could not create, update or retire some CRs.
	ReasonCRWriteFailed = "CRWriteFailed"

	// AnnotationDiscoveredBy names the CollectorDiscovery (ns/name) that created a Collector CR.
	AnnotationDiscoveredBy = "fleetmanagement.grafana.com/discovered-by"
	// AnnotationFleetCollectorID records the Fleet ID of a discovered collector.
	AnnotationFleetCollectorID = "fleetmanagement.grafana.com/fleet-collector-id"
	// AnnotationDiscoveryStale is "true" once the discovered collector left the discovery's result.
	AnnotationDiscoveryStale = "fleetmanagement.grafana.com/discovery-stale"
	// LabelDiscoveryName and LabelDiscoveryNamespace name the CollectorDiscovery that created a Collector CR.
	LabelDiscoveryName      = "fleetmanagement.grafana.com/discovery-name"
	LabelDiscoveryNamespace = "fleetmanagement.grafana.com/discovery-namespace"
)

// ConflictReason says why a discovered object has no CR of the discovery's own.
// +kubebuilder:validation:Enum=NotOwnedByDiscovery;OwnedByOtherDiscovery;NameSanitizationFailed;CreateFailed
type ConflictReason string

// The conflict reasons.
const (
	// ConflictNotOwnedByDiscovery: a CR with the derived name exists and no discovery created it.
	ConflictNotOwnedByDiscovery ConflictReason = "NotOwnedByDiscovery"
	// ConflictOwnedByOtherDiscovery: another discovery created the CR with the derived name.
	ConflictOwnedByOtherDiscovery ConflictReason = "OwnedByOtherDiscovery"
	// ConflictNameSanitizationFailed: no usable CR name or spec could be derived (e.g. a Fleet name with
	// whitespace, or two Fleet objects deriving the same CR name).
	ConflictNameSanitizationFailed ConflictReason = "NameSanitizationFailed"
	// ConflictCreateFailed: the API server refused the CR (admission or schema), see the message.
	ConflictCreateFailed ConflictReason = "CreateFailed"
)

// RemovalPolicy says what happens to a discovered CR whose Fleet object left the discovery's result.
// +kubebuilder:validation:Enum=Keep;Delete
type RemovalPolicy string

// The removal policies.
const (
	// RemovalKeep keeps the CR and marks it stale.
	RemovalKeep RemovalPolicy = "Keep"
	// RemovalDelete deletes the CR.
	RemovalDelete RemovalPolicy = "Delete"
)

// DiscoveryStatus is the part of status both discoveries share.
type DiscoveryStatus struct {
	// ObservedGeneration is the generation of the spec of the last poll.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastSyncTime is when the last poll started.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last Sync"
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// LastSuccessTime is when the last successful poll started.
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`
	// Conditions: Ready, Synced, TruncatedConflicts.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
