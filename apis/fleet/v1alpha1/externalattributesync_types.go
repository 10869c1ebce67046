package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExternalAttributeSync limits and condition vocabulary.
const (
	// MaxOwnedCollectors is how many collectors one sync may claim; above it the claim is dropped (fail closed).
	MaxOwnedCollectors = 1000
	// MaxOwnedBytes bounds the size of status.ownedKeys so the object stays far below etcd's request limit.
	MaxOwnedBytes = 512 * 1024

	ConditionStalled   = "Stalled"
	ConditionTruncated = "Truncated"

	ReasonSourceFailed      = "SourceFailed"
	ReasonStalled           = "Stalled"
	ReasonInvalidSchedule   = "InvalidSchedule"
	ReasonOwnedKeysExceeded = "OwnedKeysExceeded"
	ReasonNotTruncated      = "NotTruncated"
	ReasonNotStalled        = "NotStalled"
)

// Secret keys an ExternalAttributeSync reads.
const (
	SecretKeyBearerToken = "bearer-token"
	SecretKeyUsername    = "username"
	SecretKeyPassword    = "password"
	SecretKeyDSN         = "dsn"
)

// ExternalSourceKind is where records come from.
// +kubebuilder:validation:Enum=HTTP;SQL
type ExternalSourceKind string

// The source kinds.
const (
	SourceKindHTTP ExternalSourceKind = "HTTP"
	SourceKindSQL  ExternalSourceKind = "SQL"
)

// SQLDriver is the database a SQL source reads.
// +kubebuilder:validation:Enum=postgres;mysql
type SQLDriver string

// The SQL drivers.
const (
	SQLDriverPostgres SQLDriver = "postgres"
	SQLDriverMySQL    SQLDriver = "mysql"
)

// HTTPSource reads a JSON document over HTTP(S).
type HTTPSource struct {
	// URL of the document: http or https (https when the Secret carries credentials). In-cluster, loopback,
	// private and other special-purpose addresses are refused, at admission and on every connection.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// Method is GET or POST (sent without a body).
	// +optional
	// +kubebuilder:validation:Enum=GET;POST
	// +kubebuilder:default=GET
	Method string `json:"method,omitempty"`
	// RecordsPath is the dotted path of the records array in the document (e.g. data.collectors); empty means
	// the document itself is the array.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RecordsPath string `json:"recordsPath,omitempty"`
}

// SQLSource reads the rows of one SELECT.
type SQLSource struct {
	// Driver is postgres or mysql (MySQL and MariaDB).
	// +required
	Driver SQLDriver `json:"driver"`
	// Query is a single read-only SELECT (or WITH … SELECT). It runs in a read-only transaction with a
	// statement timeout, as one prepared statement, and at most 10,000 rows are read.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	Query string `json:"query"`
}

// SecretReference names a Secret in the sync's own namespace.
type SecretReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Namespace must be empty or the sync's own namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// ExternalSource is an HTTP document or a SQL query.
// +kubebuilder:validation:XValidation:rule="self.kind == 'HTTP' ? has(self.http) && !has(self.sql) : has(self.sql) && !has(self.http)",message="set http for kind HTTP, sql for kind SQL, not both"
type ExternalSource struct {
	// Kind is HTTP or SQL.
	// +required
	Kind ExternalSourceKind `json:"kind"`
	// HTTP source, for kind HTTP.
	// +optional
	HTTP *HTTPSource `json:"http,omitempty"`
	// SQL source, for kind SQL.
	// +optional
	SQL *SQLSource `json:"sql,omitempty"`
	// SecretRef holds the credentials: bearer-token, or username and password, for HTTP (bearer wins); dsn
	// for SQL (required).
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
}

// AttributeMapping turns a record into a collector ID and remote attributes.
type AttributeMapping struct {
	// CollectorIDField is the record field (dotted path for JSON, column name for SQL) holding the collector ID.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CollectorIDField string `json:"collectorIDField"`
	// AttributeFields maps a remote attribute key to the record field holding its value. A missing or null
	// field leaves the key unset for that collector.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=100
	AttributeFields map[string]string `json:"attributeFields"`
	// RequiredKeys are attribute keys a record must produce; records missing one are skipped.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	RequiredKeys []string `json:"requiredKeys,omitempty"`
}

// ExternalAttributeSyncSpec pulls remote attributes for collectors from an external system on a schedule.
type ExternalAttributeSyncSpec struct {
	// Source of the records.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Source"
	Source ExternalSource `json:"source"`
	// Schedule is a Go duration (at least 10s, e.g. 15m) or a 5-field cron expression (e.g. "*/10 * * * *", UTC).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Schedule"
	Schedule string `json:"schedule"`
	// Selector limits the collectors the sync may set attributes on; records for other collectors are ignored.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Selector"
	Selector PolicySelector `json:"selector"`
	// Mapping from records to collector IDs and attributes.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Mapping"
	Mapping AttributeMapping `json:"mapping"`
	// AllowEmptyResults lets a run that returns no records drop every attribute the sync set. Off, such a run
	// keeps the previous claim and sets Stalled (an emptied table is more often an outage than an intent).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Allow Empty Results"
	AllowEmptyResults bool `json:"allowEmptyResults,omitempty"`
}

// OwnedAttributes are the attributes a sync claims on one collector.
type OwnedAttributes struct {
	// CollectorID is the Fleet collector ID.
	CollectorID string `json:"collectorID"`
	// Attributes are the keys and values claimed.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
}

// ExternalAttributeSyncStatus reports the last run and the attributes the sync claims.
type ExternalAttributeSyncStatus struct {
	// ObservedGeneration is the generation of the spec of the last run.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastSyncTime is when the last run started.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last Sync"
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// LastSuccessTime is when the last successful run started.
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`
	// RecordsSeen is how many records the last run read.
	// +optional
	RecordsSeen int32 `json:"recordsSeen,omitempty"`
	// RecordsApplied is how many records produced attributes for a selected collector.
	// +optional
	RecordsApplied int32 `json:"recordsApplied,omitempty"`
	// OwnedKeys are the claimed attributes, sorted by collector ID (at most 1000 collectors; above that the
	// list is cleared and Truncated is True).
	// +optional
	// +listType=map
	// +listMapKey=collectorID
	OwnedKeys []OwnedAttributes `json:"ownedKeys,omitempty"`
	// Conditions: Ready, Synced, Stalled, Truncated.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ExternalAttributeSync sets collectors' remote attributes from an HTTP document or a SQL query.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fmeas,categories={fleet}
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.source.kind`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Seen",type=integer,JSONPath=`.status.recordsSeen`
// +kubebuilder:printcolumn:name="Applied",type=integer,JSONPath=`.status.recordsApplied`
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Fleet External Attribute Sync",resources={{Secret,v1,""},{Event,v1,""},{Collector,v1alpha1,""}}
type ExternalAttributeSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ExternalAttributeSyncSpec `json:"spec"`
	// +optional
	Status ExternalAttributeSyncStatus `json:"status,omitempty"`
}

// ExternalAttributeSyncList is a list of ExternalAttributeSyncs.
// +kubebuilder:object:root=true
type ExternalAttributeSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExternalAttributeSync `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ExternalAttributeSync{}, &ExternalAttributeSyncList{})
}
