package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Encoding is the gNMI encoding a collector asks a device for.
// +kubebuilder:validation:Enum=JSON;BYTES;PROTO;ASCII;JSON_IETF
type Encoding string

// The gNMI encodings.
const (
	EncodingJSON     Encoding = "JSON"
	EncodingBytes    Encoding = "BYTES"
	EncodingProto    Encoding = "PROTO"
	EncodingASCII    Encoding = "ASCII"
	EncodingJSONIETF Encoding = "JSON_IETF"
)

// TLSVersion is a TLS protocol version as gNMIc spells it.
// +kubebuilder:validation:Enum="1.0";"1.1";"1.2";"1.3"
type TLSVersion string

// MinimumRetryTimer is the smallest retryTimer a TargetProfile accepts: gNMIc reconnects no faster than this.
const MinimumRetryTimer = "2s"

// SecretReference names a Secret in the same namespace.
type SecretReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ClientTLS holds the TLS settings a collector uses when it dials a device.
type ClientTLS struct {
	// ServerName overrides the name checked against the device's certificate (SNI).
	// +optional
	ServerName string `json:"serverName,omitempty"`
	// MinVersion is the lowest TLS version offered.
	// +optional
	MinVersion TLSVersion `json:"minVersion,omitempty"`
	// MaxVersion is the highest TLS version offered; it must not be lower than minVersion.
	// +optional
	MaxVersion TLSVersion `json:"maxVersion,omitempty"`
	// CipherSuites lists the allowed cipher suites by their Go/IANA names, e.g.
	// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256. Empty means Go's defaults.
	// +optional
	// +listType=set
	CipherSuites []string `json:"cipherSuites,omitempty"`
	// CABundle verifies device certificates against these CAs (PEM) instead of the collector's system roots.
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty"`
	// ClientCertRef names a kubernetes.io/tls Secret (tls.crt, tls.key) whose certificate the collectors present
	// to devices.
	// +optional
	ClientCertRef *SecretReference `json:"clientCertRef,omitempty"`
	// InsecureSkipVerify accepts any device certificate (lab devices with self-signed certificates). Admitted with
	// a warning: anyone on the path can impersonate the device and read its credentials.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// CABundleSource names exactly one Secret or ConfigMap key holding PEM CA certificates.
type CABundleSource struct {
	// SecretRef is a Secret key in the profile's namespace.
	// +optional
	SecretRef *KeyReference `json:"secretRef,omitempty"`
	// ConfigMapRef is a ConfigMap key in the profile's namespace.
	// +optional
	ConfigMapRef *KeyReference `json:"configMapRef,omitempty"`
}

// KeyReference names a key of a Secret or ConfigMap in the same namespace.
type KeyReference struct {
	// Name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Key in the object; ca.crt when empty.
	// +optional
	Key string `json:"key,omitempty"`
}

// BundleKey is the key of the CA bundle, ca.crt when unset.
func (k *KeyReference) BundleKey() string {
	if k.Key == "" {
		return "ca.crt"
	}
	return k.Key
}

// GRPCKeepAlive holds gRPC keepalive settings for the collector-to-device connection.
type GRPCKeepAlive struct {
	// Time is how long the connection may be idle before a keepalive ping is sent.
	// +optional
	Time *metav1.Duration `json:"time,omitempty"`
	// Timeout is how long to wait for a ping acknowledgement before closing the connection.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// PermitWithoutStream sends pings even when no RPC is active.
	// +optional
	PermitWithoutStream bool `json:"permitWithoutStream,omitempty"`
}

// TargetProfileSpec holds connection settings shared by many Targets.
type TargetProfileSpec struct {
	// CredentialsRef names a Secret in the same namespace with keys `username` and `password`, and/or `token`.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Credentials Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	CredentialsRef *SecretReference `json:"credentialsRef,omitempty"`

	// TLS enables TLS towards the device with these settings. Leave unset for an insecure (plaintext) connection.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS"
	TLS *ClientTLS `json:"tls,omitempty"`

	// Timeout bounds each gNMI RPC and the initial dial.
	// +optional
	// +kubebuilder:default="10s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Timeout"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// RetryTimer is the wait between reconnection attempts; at least 2s.
	// +optional
	// +kubebuilder:default="2s"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Retry Timer"
	RetryTimer *metav1.Duration `json:"retryTimer,omitempty"`

	// Encoding is the gNMI encoding requested from the device.
	// +optional
	// +kubebuilder:default=JSON
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Encoding"
	Encoding Encoding `json:"encoding,omitempty"`

	// Labels are added to every metric and event collected from targets using this profile.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Labels"
	Labels map[string]string `json:"labels,omitempty"`

	// Proxy is a SOCKS5 proxy the collector dials the device through, as socks5://host:port.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Proxy"
	Proxy string `json:"proxy,omitempty"`

	// GzipCompression compresses gNMI messages with gzip.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Gzip Compression"
	GzipCompression bool `json:"gzipCompression,omitempty"`

	// TCPKeepAlive is the TCP keepalive period of the connection; unset uses the operating system default.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TCP Keepalive"
	TCPKeepAlive *metav1.Duration `json:"tcpKeepAlive,omitempty"`

	// GRPCKeepAlive configures gRPC keepalive pings.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="gRPC Keepalive"
	GRPCKeepAlive *GRPCKeepAlive `json:"grpcKeepAlive,omitempty"`
}

// TargetProfile condition reasons (condition type Ready).
const (
	// ReasonCredentialsFound: the credentials Secret exists, or none is needed.
	ReasonCredentialsFound = "CredentialsFound"
	// ReasonCredentialsNotFound: spec.credentialsRef names a Secret that does not exist.
	ReasonCredentialsNotFound = "CredentialsNotFound"
)

// TargetProfileStatus is the observed state of a TargetProfile.
type TargetProfileStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Targets is how many Targets in the namespace use this profile.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Targets"
	Targets int32 `json:"targets"`

	// Conditions: Ready (False with CredentialsNotFound while the credentials Secret is missing).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TargetProfile holds the connection settings (credentials, TLS, timeouts, encoding) that Targets refer to by
// name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=gntp,categories={gnmic}
// +kubebuilder:printcolumn:name="Credentials",type=string,JSONPath=`.spec.credentialsRef.name`
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targets`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Encoding",type=string,JSONPath=`.spec.encoding`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMI Target Profile",resources={{Secret,v1,""},{Event,v1,""}}
type TargetProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TargetProfileSpec `json:"spec,omitempty"`
	// +optional
	Status TargetProfileStatus `json:"status,omitempty"`
}

// TargetProfileList is a list of TargetProfiles.
// +kubebuilder:object:root=true
type TargetProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TargetProfile `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TargetProfile{}, &TargetProfileList{})
}
