package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Source types of a TargetSource.
const (
	SourceTypeHTTP      = "HTTP"
	SourceTypeStatic    = "Static"
	SourceTypeConfigMap = "ConfigMap"
	SourceTypeSecret    = "Secret"
)

// Well-known labels and annotations of discovered Targets and TargetSources.
const (
	// LabelTargetSource names the TargetSource that manages a Target.
	LabelTargetSource = "operator.gnmic.dev/targetsource"
	// LabelManagedBy is "targetsource" on every discovered Target.
	LabelManagedBy = "operator.gnmic.dev/managed-by"
	// ManagedByTargetSource is the value of LabelManagedBy.
	ManagedByTargetSource = "targetsource"
	// AnnotationDiscoveredName keeps the device name the source reported.
	AnnotationDiscoveredName = "operator.gnmic.dev/discovered-name"
	// AnnotationLabelPrefix prefixes the annotations that keep the original of a sanitised label.
	AnnotationLabelPrefix = "operator.gnmic.dev/label."
	// AnnotationSourceLabels lists, comma-separated, the label keys the source sets on a Target, so a label the
	// source stops setting is removed on the next run.
	AnnotationSourceLabels = "operator.gnmic.dev/source-labels"
	// AnnotationRequestedAt on a TargetSource asks for a run at once (set by the refresh API, RFC3339Nano).
	AnnotationRequestedAt = "operator.gnmic.dev/requested-at"
)

// TargetSource condition types.
const (
	TargetSourceConditionReady       = "Ready"
	TargetSourceConditionReconciling = "Reconciling"
	TargetSourceConditionStalled     = "Stalled"
	TargetSourceConditionConflicted  = "Conflicted"
	// TargetSourceConditionDegraded is True (reason InvalidDevices) while some devices of the inventory could
	// not become Targets (status.failedDevices); absent otherwise.
	TargetSourceConditionDegraded = "Degraded"
)

// TargetSource condition reasons.
const (
	ReasonSucceeded   = "Succeeded"
	ReasonFetchFailed = "FetchFailed"
	// ReasonCrossOrigin: the inventory redirected, or paginated, to another scheme/host/port; nothing was sent there.
	ReasonCrossOrigin       = "CrossOrigin"
	ReasonApplyFailed       = "ApplyFailed"
	ReasonPartialFailure    = "PartialFailure"
	ReasonEmptySource       = "EmptySource"
	ReasonTruncated         = "Truncated"
	ReasonPruneGuard        = "PruneGuard"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonConfigMapNotFound = "ConfigMapNotFound"
	ReasonCapacityExceeded  = "CapacityExceeded"
	ReasonSuspended         = "Suspended"
	ReasonConverged         = "Converged"
	ReasonRetryScheduled    = "RetryScheduled"
	ReasonNameConflict      = "NameConflict"
	// ReasonInvalidDevices: some devices failed mapping or validation (the Degraded condition). Their existing
	// Targets are kept (a device the inventory still lists is never pruned for it); when an invalid device has no
	// name, every deletion of the run is held (Ready False with this reason), since it may be any of the Targets.
	ReasonInvalidDevices = "InvalidDevices"
)

// TargetSourceSpec says where devices come from and how they become Targets.
type TargetSourceSpec struct {
	// Source is where the device list is read from.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Source"
	Source InventorySource `json:"source"`

	// Interval between runs, at least 10s. Up to 10% jitter is added, never subtracted.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="interval must be at least 10s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Interval"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// Timeout of one fetch, at least 1s; capped at interval.
	// +optional
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="timeout must be at least 1s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Timeout"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// Suspend stops runs; the managed Targets are kept as they are.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Suspend"
	Suspend bool `json:"suspend,omitempty"`

	// Target holds the defaults every discovered Target starts from.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target Template"
	Target TargetTemplate `json:"target,omitempty"`

	// Prune controls the deletion of Targets whose device is no longer returned.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Prune"
	Prune PruneSpec `json:"prune,omitempty"`

	// MaxTargets caps how many Targets the source may produce; a run over the cap changes nothing
	// (CapacityExceeded). 0 means no cap.
	// +optional
	// +kubebuilder:default=10000
	// +kubebuilder:validation:Minimum=0
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max Targets"
	MaxTargets *int32 `json:"maxTargets,omitempty"`

	// Webhook lets the inventory ask for a run through the refresh API.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Refresh Webhook"
	Webhook *RefreshWebhook `json:"webhook,omitempty"`
}

// InventorySource is one of the source kinds, chosen by type.
// +kubebuilder:validation:XValidation:rule="has(self.http) == (self.type == 'HTTP')",message="http must be set exactly when type is HTTP"
// +kubebuilder:validation:XValidation:rule="has(self.static) == (self.type == 'Static')",message="static must be set exactly when type is Static"
// +kubebuilder:validation:XValidation:rule="has(self.configMap) == (self.type == 'ConfigMap')",message="configMap must be set exactly when type is ConfigMap"
// +kubebuilder:validation:XValidation:rule="has(self.secret) == (self.type == 'Secret')",message="secret must be set exactly when type is Secret"
type InventorySource struct {
	// Type is HTTP, Static, ConfigMap or Secret.
	// +required
	// +kubebuilder:validation:Enum=HTTP;Static;ConfigMap;Secret
	Type string `json:"type"`
	// HTTP reads devices from an HTTP(S) endpoint.
	// +optional
	HTTP *HTTPSource `json:"http,omitempty"`
	// Static lists the devices inline.
	// +optional
	Static *StaticSource `json:"static,omitempty"`
	// ConfigMap reads devices from a ConfigMap in the same namespace.
	// +optional
	ConfigMap *ObjectSource `json:"configMap,omitempty"`
	// Secret reads devices from a Secret in the same namespace.
	// +optional
	Secret *ObjectSource `json:"secret,omitempty"`
}

// HTTPSource fetches a JSON or YAML document over HTTP(S).
// +kubebuilder:validation:XValidation:rule="!has(self.body) || self.method == 'POST'",message="body is only allowed with method POST"
type HTTPSource struct {
	// URL of the inventory; http or https only.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="url must be http:// or https://"
	URL string `json:"url"`
	// Method is GET or POST.
	// +optional
	// +kubebuilder:default=GET
	// +kubebuilder:validation:Enum=GET;POST
	Method string `json:"method,omitempty"`
	// Body sent with POST.
	// +optional
	Body string `json:"body,omitempty"`
	// Headers added to every request.
	// +optional
	Headers map[string]string `json:"headers,omitempty"`
	// Auth takes credentials from a Secret.
	// +optional
	Auth *HTTPAuth `json:"auth,omitempty"`
	// TLS settings for https URLs; TLS 1.2 is the minimum.
	// +optional
	TLS *HTTPTLS `json:"tls,omitempty"`
	// Mapping turns the document into devices.
	// +optional
	Mapping *Mapping `json:"mapping,omitempty"`
	// Pagination follows further pages.
	// +optional
	Pagination *Pagination `json:"pagination,omitempty"`
}

// HTTPAuth is exactly one of basic, token or header.
// +kubebuilder:validation:XValidation:rule="[has(self.basic), has(self.token), has(self.header)].filter(x, x).size() == 1",message="exactly one of basic, token or header must be set"
type HTTPAuth struct {
	// Basic authentication.
	// +optional
	Basic *BasicAuth `json:"basic,omitempty"`
	// Token sent as "Authorization: <scheme> <token>".
	// +optional
	Token *TokenAuth `json:"token,omitempty"`
	// Header sends a Secret value in a custom header.
	// +optional
	Header *HeaderAuth `json:"header,omitempty"`
}

// BasicAuth reads a username and password from a Secret.
type BasicAuth struct {
	// SecretRef names the Secret.
	// +required
	SecretRef LocalObjectRef `json:"secretRef"`
	// UsernameKey is the Secret key of the username.
	// +optional
	// +kubebuilder:default=username
	UsernameKey string `json:"usernameKey,omitempty"`
	// PasswordKey is the Secret key of the password.
	// +optional
	// +kubebuilder:default=password
	PasswordKey string `json:"passwordKey,omitempty"`
}

// TokenAuth sends a token from a Secret in the Authorization header.
type TokenAuth struct {
	// Scheme precedes the token.
	// +optional
	// +kubebuilder:default=Bearer
	Scheme string `json:"scheme,omitempty"`
	// SecretRef names the Secret and key holding the token.
	// +required
	SecretRef SecretKeyRef `json:"secretRef"`
}

// HeaderAuth sends a Secret value in a named header.
type HeaderAuth struct {
	// Name of the header.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// SecretRef names the Secret and key holding the value.
	// +required
	SecretRef SecretKeyRef `json:"secretRef"`
}

// HTTPTLS are the TLS settings of an HTTP source.
type HTTPTLS struct {
	// InsecureSkipVerify disables server certificate verification.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// CABundleRef names a ConfigMap key with PEM CA certificates.
	// +optional
	CABundleRef *ConfigMapKeyRef `json:"caBundleRef,omitempty"`
	// ClientCertRef names a kubernetes.io/tls Secret with the client certificate.
	// +optional
	ClientCertRef *LocalObjectRef `json:"clientCertRef,omitempty"`
}

// Pagination follows further pages of an HTTP source.
// +kubebuilder:validation:XValidation:rule="!has(self.requestParam) || has(self.nextField)",message="requestParam needs nextField"
type Pagination struct {
	// NextField is a dot-separated path in each page to the next page's URL, or to a token sent in requestParam.
	// A Link: rel="next" header wins over it.
	// +optional
	NextField string `json:"nextField,omitempty"`
	// RequestParam is the query parameter that carries the token read from nextField.
	// +optional
	RequestParam string `json:"requestParam,omitempty"`
	// MaxPages caps the pages read in one run; reaching it marks the result Truncated.
	// +optional
	// +kubebuilder:default=100
	// +kubebuilder:validation:Minimum=1
	MaxPages int32 `json:"maxPages,omitempty"`
}

// Mapping holds CEL expressions over self (the document) and item (the current device).
type Mapping struct {
	// Items selects the list of devices, e.g. self.results. Unset: the document itself.
	// +optional
	Items string `json:"items,omitempty"`
	// Name of the device. Unset: item.name.
	// +optional
	Name string `json:"name,omitempty"`
	// Address of the device. Unset: item.address.
	// +optional
	Address string `json:"address,omitempty"`
	// Port of the device (number or numeric string). Unset: item.port.
	// +optional
	Port string `json:"port,omitempty"`
	// Profile of the device. Unset: item.profile.
	// +optional
	Profile string `json:"profile,omitempty"`
	// Labels of the device, a map. Unset: item.labels.
	// +optional
	Labels string `json:"labels,omitempty"`
	// OnError is Skip (skip the device) or Fail (fail the run) when a device cannot be mapped.
	// +optional
	// +kubebuilder:default=Skip
	// +kubebuilder:validation:Enum=Skip;Fail
	OnError string `json:"onError,omitempty"`
}

// StaticSource lists devices inline.
type StaticSource struct {
	// Devices are the devices.
	// +required
	// +kubebuilder:validation:MinItems=1
	Devices []StaticDevice `json:"devices"`
}

// StaticDevice is one inline device.
type StaticDevice struct {
	// Name of the device.
	// +required
	Name string `json:"name"`
	// Address of the device, host or host:port.
	// +required
	Address string `json:"address"`
	// Port used when address has none.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// Profile overrides target.profile.
	// +optional
	Profile string `json:"profile,omitempty"`
	// Labels of the device.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// ObjectSource reads devices from a ConfigMap or Secret.
type ObjectSource struct {
	// Name of the ConfigMap or Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key to read; unset reads every key in sorted order and concatenates the results.
	// +optional
	Key string `json:"key,omitempty"`
	// Mapping turns each document into devices.
	// +optional
	Mapping *Mapping `json:"mapping,omitempty"`
}

// LocalObjectRef names an object in the same namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// SecretKeyRef names a key of a Secret in the same namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key in the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// ConfigMapKeyRef names a key of a ConfigMap in the same namespace.
type ConfigMapKeyRef struct {
	// Name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key in the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// TargetTemplate are the defaults of discovered Targets.
type TargetTemplate struct {
	// Port used when a device has none.
	// +optional
	// +kubebuilder:default=57400
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// Profile used when a device has none.
	// +optional
	Profile string `json:"profile,omitempty"`
	// Labels on every Target; the source's labels win.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// PruneSpec guards deletions.
type PruneSpec struct {
	// MaxDeleteRatio is the largest share of managed Targets, in percent, one run may delete; 100 disables the guard.
	// +optional
	// +kubebuilder:default=50
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxDeleteRatio *int32 `json:"maxDeleteRatio,omitempty"`
	// AllowEmptySource lets an empty answer delete every managed Target.
	// +optional
	AllowEmptySource bool `json:"allowEmptySource,omitempty"`
}

// RefreshWebhook configures the refresh API for this TargetSource.
// +kubebuilder:validation:XValidation:rule="!self.enabled || (has(self.auth) && (has(self.auth.bearer) || has(self.auth.signature)))",message="auth is required when the webhook is enabled"
type RefreshWebhook struct {
	// Enabled turns the refresh endpoint on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Auth: bearer, signature, or both (both must then pass).
	// +optional
	Auth *RefreshAuth `json:"auth,omitempty"`
	// Debounce: requests within this window of the last accepted one are answered but do not trigger a run.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	Debounce *metav1.Duration `json:"debounce,omitempty"`
}

// RefreshAuth authenticates refresh requests.
type RefreshAuth struct {
	// Bearer compares "Authorization: Bearer <token>" with a Secret key.
	// +optional
	Bearer *BearerAuth `json:"bearer,omitempty"`
	// Signature checks an HMAC of "<X-Hook-Timestamp>.<request body>"; the timestamp must be within 5 minutes
	// of the operator's clock, and an accepted signature is not accepted again.
	// +optional
	Signature *SignatureAuth `json:"signature,omitempty"`
}

// BearerAuth names the Secret key holding the expected token.
type BearerAuth struct {
	// SecretRef names the Secret and key.
	// +required
	SecretRef SecretKeyRef `json:"secretRef"`
}

// SignatureAuth checks an HMAC signature of the timestamp and body, sent as "<algorithm>=<hex>" or "<hex>".
type SignatureAuth struct {
	// SecretRef names the Secret and key of the HMAC key.
	// +required
	SecretRef SecretKeyRef `json:"secretRef"`
	// Header carrying the signature.
	// +optional
	// +kubebuilder:default=X-Hook-Signature
	Header string `json:"header,omitempty"`
	// Algorithm is sha256 or sha512.
	// +optional
	// +kubebuilder:default=sha256
	// +kubebuilder:validation:Enum=sha256;sha512
	Algorithm string `json:"algorithm,omitempty"`
}

// FailedDevice is a device that could not become a Target.
type FailedDevice struct {
	// Name the source reported (may be empty).
	Name string `json:"name"`
	// Reason: NotAnObject, MissingName, MissingAddress, InvalidPort, InvalidProfile, InvalidLabels,
	// MappingError(<field>), DuplicateName or ApplyFailed.
	Reason string `json:"reason"`
}

// TargetSourceStatus is the outcome of the last run.
type TargetSourceStatus struct {
	// ObservedGeneration is the generation the last run used.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, Reconciling, Stalled, Conflicted.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastSyncTime is when the last run ended.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// LastSuccessfulSyncTime is when the last successful run ended.
	// +optional
	LastSuccessfulSyncTime *metav1.Time `json:"lastSuccessfulSyncTime,omitempty"`
	// NextSyncTime is when the next run is due; unset while suspended.
	// +optional
	NextSyncTime *metav1.Time `json:"nextSyncTime,omitempty"`
	// SourceDigest is an order-independent digest (16 hex) of the desired Targets.
	// +optional
	SourceDigest string `json:"sourceDigest,omitempty"`
	// Discovered is how many devices the source returned.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Discovered"
	Discovered int32 `json:"discovered"`
	// Managed is how many Targets this TargetSource manages.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Managed"
	Managed int32 `json:"managed"`
	// Invalid is how many devices could not become a Target.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Invalid"
	Invalid int32 `json:"invalid"`
	// Sanitized is how many devices had labels rewritten.
	// +optional
	Sanitized int32 `json:"sanitized"`
	// Conflicted is how many wanted names are held by Targets this TargetSource does not manage.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conflicted"
	Conflicted int32 `json:"conflicted"`
	// Pruned is how many Targets the last run deleted.
	// +optional
	Pruned int32 `json:"pruned"`
	// FailedDevices are up to 10 devices that could not become a Target, with the reason.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	FailedDevices []FailedDevice `json:"failedDevices,omitempty"`
	// ConsecutiveFailures counts failed runs since the last success.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// LastError is the error of the last failed run.
	// +optional
	LastError string `json:"lastError,omitempty"`
}

// TargetSource reads network devices from an inventory (HTTP, inline, ConfigMap or Secret) and keeps one Target
// per device.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gnts,categories={gnmic}
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.source.type`
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.managed`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Last Sync",type=date,JSONPath=`.status.lastSyncTime`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,priority=1,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMI Target Source",resources={{Target,v1alpha1,""}}
type TargetSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TargetSourceSpec `json:"spec"`
	// +optional
	Status TargetSourceStatus `json:"status,omitempty"`
}

// TargetSourceList is a list of TargetSources.
// +kubebuilder:object:root=true
type TargetSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TargetSource `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TargetSource{}, &TargetSourceList{})
}
