package v1alpha1

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster defaults.
const (
	// DefaultRestPort is the port of a collector's REST API when spec.api.restPort is unset.
	DefaultRestPort int32 = 7890
)

// Cluster condition types and reasons.
const (
	ClusterConditionReady             = "Ready"
	ClusterConditionCertificatesReady = "CertificatesReady"
	ClusterConditionConfigApplied     = "ConfigApplied"
	ClusterConditionCapacityExhausted = "CapacityExhausted"
	// ClusterConditionFeaturesSupported is False while a Pipeline of the Cluster asks for something its
	// collectors cannot decode (reason UnsupportedByCollector); those objects are left out of the push.
	ClusterConditionFeaturesSupported = "FeaturesSupported"
	// ClusterConditionTargetTLSReady is False while some TargetProfile's device TLS files (CA bundle, client
	// certificate) are not in the collector pods (reason TargetTLSHeldBack): the object is missing, or the
	// kubelet may not have written a newly added file yet. Targets of those profiles are not pushed meanwhile,
	// since gNMIc crashes applying a subscription to a target whose TLS file does not exist.
	ClusterConditionTargetTLSReady = "TargetTLSReady"
	// ClusterConditionCredentialsWithheld is True (reason PlaintextAPI) while the collectors' REST API is plain
	// HTTP (spec.api.plainHTTP) and some TargetProfile names credentials: plans are pushed without them, since
	// anything on the pod network could read them. Absent otherwise.
	ClusterConditionCredentialsWithheld = "CredentialsWithheld"
	// ClusterConditionCredentialsMissing is True (reason CredentialsSecretNotFound, with a Warning event) while
	// some TargetProfile's credentialsRef names a Secret that does not exist: its targets are held back (left out
	// of the push) rather than pushed without credentials. Absent otherwise.
	ClusterConditionCredentialsMissing = "CredentialsMissing"

	ReasonClusterReady          = "ClusterReady"
	ReasonFeaturesSupported     = "FeaturesSupported"
	ReasonClusterPartiallyReady = "ClusterPartiallyReady"
	ReasonClusterNotReady       = "ClusterNotReady"
	ReasonConfigurationApplied  = "ConfigurationApplied"
	ReasonConfigurationFailed   = "ConfigurationFailed"
	ReasonWaitingForPods        = "WaitingForPods"
	ReasonCapacityExhausted     = "CapacityExhausted"
	ReasonCapacityAvailable     = "CapacityAvailable"
	ReasonCertificatesIssued    = "CertificatesIssued"
	ReasonCertificatesFailed    = "CertificatesFailed"
	ReasonTargetTLSInPlace      = "TargetTLSInPlace"
	ReasonTargetTLSHeldBack     = "TargetTLSHeldBack"
	// ReasonTargetTLSLastGood: a TargetProfile's CA bundle or client certificate object is gone, and its targets
	// keep the last good files (still in the target-tls Secret) until it is back.
	ReasonTargetTLSLastGood        = "LastGoodTLSInUse"
	ReasonCredentialsSecretMissing = "CredentialsSecretNotFound"
	ReasonPlaintextAPI             = "PlaintextAPI"
	// ReasonCertificatePending: a cert-manager Certificate's Secret is not written (or not for the requested
	// names) yet; the operator deploys and pushes nothing until it is.
	ReasonCertificatePending = "CertificatePending"
	// ReasonCertificateTimedOut: the Secret is still not usable after the wait (see the operator's
	// --gnmic-certificate-wait); the message carries cert-manager's Ready condition.
	ReasonCertificateTimedOut = "CertificateTimedOut"
)

// IssuerReference names a cert-manager Issuer or ClusterIssuer.
type IssuerReference struct {
	// Name of the issuer.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Kind is Issuer (default) or ClusterIssuer.
	// +optional
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	Kind string `json:"kind,omitempty"`
	// Group of the issuer; cert-manager.io when empty.
	// +optional
	Group string `json:"group,omitempty"`
}

// ClusterTLS asks for a certificate for one of the collectors' connections (api.tls: the REST API's serving
// certificate; grpcTunnel.tls: the tunnel server's; clientTLS: the client certificate presented to devices). Set
// as {} the operator issues and rotates it from a per-Cluster CA; with issuerRef cert-manager issues it.
// bundleRef and useCSIDriver are refused.
type ClusterTLS struct {
	// IssuerRef is the cert-manager issuer that signs the certificate: the operator creates a Certificate
	// gnmic-<cluster>-<api|tunnel|client>-cert and mounts its Secret (for api.tls it trusts the Secret's ca.crt).
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`
	// BundleRef is refused (not supported): the operator trusts the CA that issued the certificate.
	// +optional
	BundleRef string `json:"bundleRef,omitempty"`
	// UseCSIDriver is refused (not supported): the operator reads and fingerprints the certificate's Secret.
	// +optional
	UseCSIDriver bool `json:"useCSIDriver,omitempty"`
}

// ClusterAPI configures the collectors' REST and gNMI servers.
type ClusterAPI struct {
	// RestPort is the port of the REST API the operator pushes configuration to.
	// +optional
	// +kubebuilder:default=7890
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	RestPort int32 `json:"restPort,omitempty"`
	// GNMIPort, when set, enables the collectors' gNMI server on this port; it must differ from restPort.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	GNMIPort int32 `json:"gnmiPort,omitempty"`
	// TLS chooses who issues the REST API's certificate: a per-Cluster CA the operator manages (unset or {}) or
	// cert-manager (issuerRef). The API is mutual TLS: the collectors accept only clients with a certificate of
	// that CA (the operator's), and the operator trusts that CA alone.
	// +optional
	TLS *ClusterTLS `json:"tls,omitempty"`
	// PlainHTTP opts out of TLS: the collectors serve their REST API over plain HTTP, and the operator then sends
	// them no device credentials (condition CredentialsWithheld), since anything on the pod network could read
	// them. It cannot be combined with tls.
	// +optional
	PlainHTTP bool `json:"plainHTTP,omitempty"`
}

// ServiceTemplate shapes a Service the operator creates.
type ServiceTemplate struct {
	// Type of the Service.
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	Type corev1.ServiceType `json:"type,omitempty"`
	// Annotations added to the Service.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Labels added to the Service.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
}

// GRPCTunnel enables gNMIc's gRPC tunnel server, which devices dial into.
type GRPCTunnel struct {
	// Port of the tunnel server.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// TLS serves the tunnel over TLS with a certificate for the tunnel Service's names ({}: from the per-Cluster
	// CA; issuerRef: from cert-manager), given to gNMIc's tunnel-server.tls.
	// +optional
	TLS *ClusterTLS `json:"tls,omitempty"`
	// ClientCARef names a key (ca.crt when unset) of a Secret in the Cluster's namespace holding the PEM CA that
	// signs the devices' client certificates. The tunnel server then requires and verifies one (gNMIc's
	// tunnel-server.tls client-auth require-verify), so only devices holding a certificate of that CA can
	// register. Needs tls. The collectors read it at start: roll them after changing it.
	// +optional
	ClientCARef *KeyReference `json:"clientCARef,omitempty"`
	// Service exposing the tunnel server; type defaults to ClusterIP (set LoadBalancer to publish the tunnel to
	// devices outside the cluster).
	// +optional
	Service *ServiceTemplate `json:"service,omitempty"`
}

// TargetDistribution tunes how targets are spread over the collector pods.
type TargetDistribution struct {
	// PodCapacity is the most targets one pod holds. Unset means ceil(targets / pods); targets that fit nowhere
	// are counted in status.unassignedTargets.
	// +optional
	// +kubebuilder:validation:Minimum=1
	PodCapacity *int32 `json:"podCapacity,omitempty"`
	// UnreadyGracePeriod is how long a collector pod may stay unready (or missing) before its targets are placed
	// on the ready pods; they move back, under the same placement rule, once it is ready again. Ready pods get
	// their plans whatever the state of the others. Default 30s; 0s re-places at once.
	// +optional
	UnreadyGracePeriod *metav1.Duration `json:"unreadyGracePeriod,omitempty"`
}

// DefaultUnreadyGracePeriod is spec.targetDistribution.unreadyGracePeriod when unset.
const DefaultUnreadyGracePeriod = 30 * time.Second

// UnreadyGracePeriod returns spec.targetDistribution.unreadyGracePeriod with its default.
func (c *Cluster) UnreadyGracePeriod() time.Duration {
	if d := c.Spec.TargetDistribution; d != nil && d.UnreadyGracePeriod != nil && d.UnreadyGracePeriod.Duration >= 0 {
		return d.UnreadyGracePeriod.Duration
	}
	return DefaultUnreadyGracePeriod
}

// States of a collector pod in status.pods.
const (
	// CollectorPodConfigured: ready, and its current plan was applied.
	CollectorPodConfigured = "Configured"
	// CollectorPodApplyFailed: ready, but its last apply failed (message says why); retried.
	CollectorPodApplyFailed = "ApplyFailed"
	// CollectorPodUnready: not ready (or missing) within the grace period; its targets wait for it.
	CollectorPodUnready = "Unready"
	// CollectorPodEvacuated: unready past the grace period; its targets are placed on the ready pods.
	CollectorPodEvacuated = "Evacuated"
)

// CollectorPodStatus is what the operator knows of one collector pod.
type CollectorPodStatus struct {
	// Name of the pod (gnmic-<cluster>-<index>).
	Name string `json:"name"`
	// Ready is the pod's Ready condition.
	Ready bool `json:"ready"`
	// State is Configured, ApplyFailed, Unready or Evacuated.
	State string `json:"state"`
	// Targets is how many targets are placed on the pod.
	Targets int32 `json:"targets"`
	// UnreadySince is when the pod was last seen turning unready (or missing); absent while ready.
	// +optional
	UnreadySince *metav1.Time `json:"unreadySince,omitempty"`
	// Message says why an apply failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// MaxOutputInstances bounds ClusterStatus.OutputInstances (its CRD MaxItems): a plan with more outputs records the
// first ones by name only.
const MaxOutputInstances = 512

// OutputInstance is one gNMIc output of a Cluster's collectors, recorded so that its name stays the same across plans.
type OutputInstance struct {
	// Name is the gNMIc output name: namespace/output, or namespace/pipeline/output for an instance split off because
	// the Output's Pipelines apply different output processors (namespace/pipeline/output/<digest> when that is taken).
	Name string `json:"name"`
	// Output is the name of the Output it comes from (in the namespace that Name starts with).
	Output string `json:"output"`
	// ProcessorsDigest is the first 16 hex digits of the SHA-256 of the instance's output processors (their
	// namespace/name joined by commas, in order); empty when it has none.
	// +optional
	ProcessorsDigest string `json:"processorsDigest,omitempty"`
}

// UID assignment policies of the collector pods.
const (
	// UIDAssignmentOperator runs the collectors as DefaultCollectorUID/GID: the upstream gNMIc images declare no
	// user (they run as root), so runAsNonRoot needs a numeric UID or the kubelet refuses the container.
	UIDAssignmentOperator = "Operator"
	// UIDAssignmentPlatform sets no UID/GID and leaves the choice to the platform (OpenShift's restricted-v2 SCC
	// assigns one from the namespace's range and rejects a fixed one outside it).
	UIDAssignmentPlatform = "Platform"

	// DefaultCollectorUID is the user (and group) the collectors run as under UIDAssignmentOperator. 65532 is the
	// conventional unprivileged "nonroot" user; the gNMIc binary and the mounted config are world-readable.
	DefaultCollectorUID int64 = 65532
)

// CollectorPodTemplate overrides parts of the collector pods the operator builds.
type CollectorPodTemplate struct {
	// NodeSelector constrains the collectors to matching nodes.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the collector pods.
	// +optional
	// +listType=atomic
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity of the collector pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// ImagePullSecrets for a private registry holding the gNMIc image.
	// +optional
	// +listType=atomic
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// SecurityContext of the collector pods: every field set here wins over the operator's default (runAsNonRoot,
	// the UID/GID of uidAssignment, fsGroup, RuntimeDefault seccomp); the fields left unset keep the default.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`
	// UIDAssignment chooses who picks the collectors' UID: Operator (runAsUser/runAsGroup/fsGroup 65532) or
	// Platform (none set; OpenShift's SCC assigns one). Unset: Platform when the cluster serves the
	// security.openshift.io API group, Operator otherwise.
	// +optional
	// +kubebuilder:validation:Enum=Operator;Platform
	UIDAssignment string `json:"uidAssignment,omitempty"`
}

// ClusterSpec describes a set of gNMIc collectors run as a StatefulSet.
type ClusterSpec struct {
	// Image is the gNMIc container image (v0.45 or later: collector mode). Empty runs the operator's default
	// (`--gnmic-default-image`, which the installs set from their RELATED_IMAGE_GNMIC variable), so the collectors
	// follow the operator's upgrades and an image mirror configured for the operator's related images.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image"
	Image string `json:"image,omitempty"`

	// Replicas is the number of collector pods.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas *int32 `json:"replicas,omitempty"`

	// API configures the collectors' REST API (and optional gNMI server).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="API"
	API *ClusterAPI `json:"api,omitempty"`

	// ClientTLS gives the collectors a client certificate ({}: from the per-Cluster CA; issuerRef: from
	// cert-manager) that they present to every device reached over TLS whose TargetProfile names none of its own.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Client TLS"
	ClientTLS *ClusterTLS `json:"clientTLS,omitempty"`

	// GRPCTunnel enables the gRPC tunnel server.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="gRPC Tunnel"
	GRPCTunnel *GRPCTunnel `json:"grpcTunnel,omitempty"`

	// Resources of the collector container.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:resourceRequirements"}
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Env adds environment variables to the collector container.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Environment"
	Env []corev1.EnvVar `json:"env,omitempty"`

	// PodTemplate overrides scheduling, pull secrets and the security context of the collector pods (resources
	// are spec.resources).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Template"
	PodTemplate *CollectorPodTemplate `json:"podTemplate,omitempty"`

	// TargetDistribution tunes target placement.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Target Distribution"
	TargetDistribution *TargetDistribution `json:"targetDistribution,omitempty"`
}

// ClusterStatus is the observed state of a Cluster.
type ClusterStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the desired pod count (scale subresource).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is how many collector pods are ready.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready Replicas"
	ReadyReplicas int32 `json:"readyReplicas"`
	// Selector is the pods' label selector (scale subresource).
	// +optional
	Selector string `json:"selector,omitempty"`
	// PipelinesCount is how many enabled Pipelines feed this cluster.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pipelines"
	// +optional
	PipelinesCount int32 `json:"pipelinesCount"`
	// TargetsCount is how many distinct Targets the cluster holds.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Targets"
	// +optional
	TargetsCount int32 `json:"targetsCount"`
	// UnassignedTargets is how many Targets fit on no pod (podCapacity exhausted).
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Unassigned Targets"
	// +optional
	UnassignedTargets int32 `json:"unassignedTargets"`
	// SubscriptionsCount is how many Subscriptions the enabled Pipelines resolve to.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Subscriptions"
	// +optional
	SubscriptionsCount int32 `json:"subscriptionsCount"`
	// InputsCount is how many Inputs the enabled Pipelines resolve to.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Inputs"
	// +optional
	InputsCount int32 `json:"inputsCount"`
	// CollectorVersion is the gNMIc version read from the image tag; empty when the tag is not a version (the
	// collectors are then assumed current).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Collector Version"
	CollectorVersion string `json:"collectorVersion,omitempty"`
	// OutputsCount is how many Outputs the enabled Pipelines resolve to.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Outputs"
	// +optional
	OutputsCount int32 `json:"outputsCount"`
	// TargetsNotCollected is how many placed or unassigned targets no ready, configured pod collects right now
	// (on an unready pod within the grace period, on a pod whose apply failed, or fitting nowhere).
	// +optional
	TargetsNotCollected int32 `json:"targetsNotCollected"`
	// Pods is the state of each collector pod, by index.
	// +optional
	// +listType=map
	// +listMapKey=name
	Pods []CollectorPodStatus `json:"pods,omitempty"`
	// OutputInstances are the gNMIc outputs the collectors run, each with the Output it comes from and a digest of
	// its output processors. The next plans read them back so an instance keeps its name when another Pipeline's
	// processor list for the same Output starts to differ: only the split-off instance gets a new name, and the
	// subscriptions routed to the others are not restarted. One entry per output in the collectors' configuration
	// (at most MaxOutputInstances; an Output without entries is named as if none had been recorded).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=512
	OutputInstances []OutputInstance `json:"outputInstances,omitempty"`
	// Conditions: Ready, ConfigApplied, CapacityExhausted, CertificatesReady, FeaturesSupported.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Cluster is a set of gNMIc collectors (StatefulSet gnmic-<name>) that the operator pushes the Targets of its
// enabled Pipelines to, spread over the pods by bounded-load rendezvous hashing.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=gncl,categories={gnmic}
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Pipelines",type=integer,JSONPath=`.status.pipelinesCount`
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targetsCount`
// +kubebuilder:printcolumn:name="Unassigned",type=integer,JSONPath=`.status.unassignedTargets`
// +kubebuilder:printcolumn:name="Subs",type=integer,JSONPath=`.status.subscriptionsCount`
// +kubebuilder:printcolumn:name="Inputs",type=integer,JSONPath=`.status.inputsCount`
// +kubebuilder:printcolumn:name="Outputs",type=integer,JSONPath=`.status.outputsCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="gNMIc Cluster",resources={{StatefulSet,v1,""},{Service,v1,""},{ConfigMap,v1,""}}
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterSpec `json:"spec"`
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterList is a list of Clusters.
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

// RestPort returns the effective REST API port.
func (c *Cluster) RestPort() int32 {
	if c.Spec.API != nil && c.Spec.API.RestPort != 0 {
		return c.Spec.API.RestPort
	}
	return DefaultRestPort
}

// DefaultClusterDomain is the cluster's DNS domain when none is configured.
const DefaultClusterDomain = "cluster.local"

// CollectorPodAddress returns "host:port" of the REST API of collector pod i: the pod's DNS name under the
// headless Service gnmic-<name> (gnmic-<name>-<i>.gnmic-<name>.<namespace>.svc.<domain>) and the REST port. An
// empty clusterDomain means DefaultClusterDomain.
func (c *Cluster) CollectorPodAddress(i int, clusterDomain string) string {
	if clusterDomain == "" {
		clusterDomain = DefaultClusterDomain
	}
	service := "gnmic-" + c.Name
	return fmt.Sprintf("%s-%d.%s.%s.svc.%s:%d", service, i, service, c.Namespace, clusterDomain, c.RestPort())
}

// DesiredReplicas returns spec.replicas with its default.
func (c *Cluster) DesiredReplicas() int32 {
	if c.Spec.Replicas == nil {
		return 1
	}
	return *c.Spec.Replicas
}

func init() {
	objectTypes = append(objectTypes, &Cluster{}, &ClusterList{})
}
