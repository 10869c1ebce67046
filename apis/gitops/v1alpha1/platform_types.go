package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stage names of the pipeline, also the `katastroma` subcommands and the suffix of each child's name.
const (
	StageSource      = "source"
	StageRenderer    = "renderer"
	StageOrderer     = "orderer"
	StageLabeler     = "labeler"
	StageProvisioner = "provisioner"
	StagePruner      = "pruner"
	StagePharos      = "pharos"
)

// StageSpec sizes one stage.
type StageSpec struct {
	// Replicas of the stage's Deployment. Every stage but pharos is stateless and scales freely; pharos keeps its
	// state in one ConfigMap and runs one replica.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Replicas *int32 `json:"replicas,omitempty"`
	// Resources of the stage's container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
}

// PlatformStages sizes every stage; an omitted stage runs one replica without resource settings.
type PlatformStages struct {
	// Source is the source handler (GitHub webhook, Retrieve, Replay).
	// +optional
	Source StageSpec `json:"source,omitempty"`
	// Renderer renders Helm charts, Kustomizations and plain YAML.
	// +optional
	Renderer StageSpec `json:"renderer,omitempty"`
	// Orderer sorts manifests for apply and prune.
	// +optional
	Orderer StageSpec `json:"orderer,omitempty"`
	// Labeler labels manifests with their tenant and source target.
	// +optional
	Labeler StageSpec `json:"labeler,omitempty"`
	// Provisioner applies as the tenant provisioner ServiceAccount.
	// +optional
	Provisioner StageSpec `json:"provisioner,omitempty"`
	// Pruner deletes as the tenant pruner ServiceAccount.
	// +optional
	Pruner StageSpec `json:"pruner,omitempty"`
	// Pharos replays failed and crashed events.
	// +optional
	Pharos StageSpec `json:"pharos,omitempty"`
}

// PlatformSpec is one deployment of the gitops pipeline in the Platform's namespace.
type PlatformSpec struct {
	// Image of katastroma; every stage runs the same binary with its own subcommand. Empty runs the operator's
	// default (`--katastroma-default-image`, which the installs set from their RELATED_IMAGE_KATASTROMA variable:
	// the operator's own image, which ships /katastroma), so the stages follow the operator's upgrades and an image
	// mirror configured for the operator's related images.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image"
	Image string `json:"image,omitempty"`
	// Stages sizes each stage: scaling a stage is its replicas field.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Stages"
	Stages PlatformStages `json:"stages,omitempty"`
	// CollectorEndpoint is the OTLP/gRPC endpoint (host:port) of the OTel Collector the stages export their spans
	// to; run the collector with the routing ConfigMap this Platform renders. Empty exports nothing (pharos then
	// sees no span and replays nothing).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Collector Endpoint"
	CollectorEndpoint string `json:"collectorEndpoint,omitempty"`
	// TraceBackend is the OTLP/gRPC endpoint (host:port) the collector sends every trace to, e.g. Tempo. Empty
	// keeps only the pharos route.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Trace Backend"
	TraceBackend string `json:"traceBackend,omitempty"`
	// LeaseStaleAfter is the source handler's --lease-stale-after.
	// +optional
	// +kubebuilder:default="10m"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Lease Stale After"
	LeaseStaleAfter *metav1.Duration `json:"leaseStaleAfter,omitempty"`
	// CrashTimeout is pharos's --crash-timeout; it must stay above LeaseStaleAfter or the replay of a crashed
	// event is refused while the dead processor's lease is still active.
	// +optional
	// +kubebuilder:default="12m"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Crash Timeout"
	CrashTimeout *metav1.Duration `json:"crashTimeout,omitempty"`
	// ReplayLimit is how often one event is replayed (pharos's --replay-limit and the source handler's
	// --max-replay-attempts).
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replay Limit"
	ReplayLimit int32 `json:"replayLimit,omitempty"`
	// RPCTimeout is every pipeline stage's --rpc-timeout: the deadline of each stage RPC. The source handler's
	// call carries an event through every later stage, so it bounds one event; GitTimeout + RPCTimeout must
	// stay below LeaseStaleAfter (defaults count for unset fields). Unset: the stages' default (5m).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="RPC Timeout"
	RPCTimeout *metav1.Duration `json:"rpcTimeout,omitempty"`
	// GitTimeout is the source handler's --git-timeout: the deadline of each git fetch or ref listing. Unset: the
	// source handler's default (2m). See RPCTimeout for the bound both share.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Git Timeout"
	GitTimeout *metav1.Duration `json:"gitTimeout,omitempty"`
	// VerifyTimeout is the provisioner's --verify-timeout: how long an event waits for the objects it applied to
	// become healthy (kstatus Current) before it fails, for every source target that sets no data.verify-timeout
	// of its own (a slow rollout gets longer there). 0s turns the verify off: success then means applied. The
	// verify runs inside the provisioner's call, so it must stay below spec.rpcTimeout. Unset: the provisioner's
	// default (3m, lowered to 3/5 of a smaller rpcTimeout).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Verify Timeout"
	VerifyTimeout *metav1.Duration `json:"verifyTimeout,omitempty"`
}

// StageStatus is what the controller observed of one stage.
type StageStatus struct {
	// Name of the stage.
	Name string `json:"name"`
	// Replicas wanted.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas reported by the stage's Deployment.
	ReadyReplicas int32 `json:"readyReplicas"`
	// Endpoint is the stage's in-cluster address (Service DNS name and port).
	Endpoint string `json:"endpoint"`
}

// PlatformStatus is what the controller observed.
type PlatformStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Stages, in pipeline order, then pharos.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Stages"
	Stages []StageStatus `json:"stages,omitempty"`
	// WebhookEndpoint is the source handler's in-cluster GitHub webhook URL base (POST /webhook/{namespace}).
	// +optional
	WebhookEndpoint string `json:"webhookEndpoint,omitempty"`
	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Platform deploys the gitops pipeline: one Deployment, Service, ServiceAccount and NetworkPolicy per stage, a
// PodDisruptionBudget per pipeline stage, the stages' RBAC (the provisioner and pruner may impersonate only the
// tenant ServiceAccounts of those names), pharos with its state ConfigMap, and the OTel Collector routing
// ConfigMap that sends the gitops spans to pharos.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kplat,categories=katastroma
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Platform",resources={{Deployment,v1},{Service,v1},{ServiceAccount,v1},{NetworkPolicy,v1},{PodDisruptionBudget,v1},{ConfigMap,v1}}
type Platform struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired pipeline.
	// +required
	Spec PlatformSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status PlatformStatus `json:"status,omitempty"`
}

// PlatformList is a list of Platforms.
// +kubebuilder:object:root=true
type PlatformList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Platforms.
	Items []Platform `json:"items"`
}

func init() { objectTypes = append(objectTypes, &Platform{}, &PlatformList{}) }
