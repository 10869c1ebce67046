package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Finalizer holds an AgentDeployment until it has been removed from the MCP discovery registry, so clients stop
// routing to the agent before garbage collection tears down its Service.
const Finalizer = "agentrax.io/mcp-deregister"

// AnnotationRetryRollout retries a rolled-back image: when spec.image still names status.abortedVersion and this
// annotation holds a value other than status.retriedRollout, the canary starts again at step 0 (e.g.
// `kubectl annotate ad my-agent agentrax.io/retry-rollout="$(date +%s)" --overwrite`). Setting the same image
// again is no change Kubernetes would report, so this is how "try it once more" is said.
const AnnotationRetryRollout = "agentrax.io/retry-rollout"

// Labels the operator stamps on every workload it manages.
const (
	// LabelAgent marks agent pods; the tenant NetworkPolicies select on it.
	LabelAgent = "agentrax.io/agent"
	// LabelVariant is "stable" or "canary".
	LabelVariant = "agentrax.io/variant"
	// LabelName is app.kubernetes.io/name, set to the AgentDeployment's name.
	LabelName = "app.kubernetes.io/name"
	// VariantStable labels the stable Deployment's pods.
	VariantStable = "stable"
	// VariantCanary labels the canary Deployment's pods.
	VariantCanary = "canary"
)

// DefaultPort is the agent's container port when spec.port is not set.
const DefaultPort int32 = 8080

// DefaultProgressDeadline is spec.rollout.progressDeadline when not set.
const DefaultProgressDeadline = 10 * time.Minute

// ScalingMetric selects the external metric the HorizontalPodAutoscaler follows.
// +kubebuilder:validation:Enum=queueDepth;gpuUtilization
type ScalingMetric string

const (
	// MetricQueueDepth scales on agentrax_queue_depth.
	MetricQueueDepth ScalingMetric = "queueDepth"
	// MetricGPUUtilization scales on agentrax_gpu_utilization.
	MetricGPUUtilization ScalingMetric = "gpuUtilization"
)

// RolloutStrategy says how an image change is rolled out.
// +kubebuilder:validation:Enum=Recreate;Canary
type RolloutStrategy string

const (
	// StrategyRecreate replaces the stable Deployment's image in place.
	StrategyRecreate RolloutStrategy = "Recreate"
	// StrategyCanary runs the new image as a canary and shifts traffic in steps gated by metrics.
	StrategyCanary RolloutStrategy = "Canary"
)

// Phase is the high-level lifecycle state of an AgentDeployment.
// +kubebuilder:validation:Enum=Pending;Running;RolloutInProgress;RolloutFailed;Degraded
type Phase string

const (
	// PhasePending means the stable Deployment has fewer than replicas.min available pods.
	PhasePending Phase = "Pending"
	// PhaseRunning means the stable Deployment has at least replicas.min available pods.
	PhaseRunning Phase = "Running"
	// PhaseRolloutInProgress means a canary rollout is running.
	PhaseRolloutInProgress Phase = "RolloutInProgress"
	// PhaseRolloutFailed means the last canary rollout was rolled back.
	PhaseRolloutFailed Phase = "RolloutFailed"
	// PhaseDegraded means the stable Deployment stopped progressing (e.g. its progress deadline passed).
	PhaseDegraded Phase = "Degraded"
)

// AgentDeployment condition types.
const (
	// ConditionReady is True when every child is reconciled and the stable Deployment has its minimum replicas.
	ConditionReady = "Ready"
	// ConditionReconciled is True when the latest generation has been processed.
	ConditionReconciled = "Reconciled"
	// ConditionImagePullFailed is True when a pod of the agent cannot pull its image.
	ConditionImagePullFailed = "ImagePullFailed"
	// ConditionQuotaLimited is True when the HPA's maxReplicas is capped by the TenantQuota.
	ConditionQuotaLimited = "QuotaLimited"
	// ConditionMCPHandshakeFailed is True when the MCP handshake with the agent failed.
	ConditionMCPHandshakeFailed = "MCPHandshakeFailed"
	// ConditionSampleInsufficient is True when canary metrics are below rollback.minRequestSample.
	ConditionSampleInsufficient = "SampleInsufficient"
	// ConditionRolloutHealthy is True when the canary's last analysis passed or it was promoted, False with the
	// breached threshold and the observed value when it was rolled back, Unknown while nothing can be judged.
	ConditionRolloutHealthy = "RolloutHealthy"
)

// Condition reasons.
const (
	// ReasonHPAMaxReplicasCapped: the quota headroom is below replicas.min, so maxReplicas is clamped to min.
	ReasonHPAMaxReplicasCapped = "HPAMaxReplicasCapped"
	// ReasonMaxReplicasReduced: the quota headroom lowers maxReplicas below replicas.max but not below min.
	ReasonMaxReplicasReduced = "MaxReplicasReduced"
	// ReasonWithinQuota: the HPA gets replicas.max.
	ReasonWithinQuota = "WithinQuota"
	// ReasonTenantQuotaNotFound: spec.tenantRef names no TenantQuota.
	ReasonTenantQuotaNotFound = "TenantQuotaNotFound"
	// ReasonReconciled: every child matches the spec.
	ReasonReconciled = "Reconciled"
	// ReasonReconcileFailed: a child could not be written.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonAvailable: the stable Deployment has at least replicas.min available pods.
	ReasonAvailable = "Available"
	// ReasonProgressing: the stable Deployment has fewer than replicas.min available pods.
	ReasonProgressing = "Progressing"
)

// ReplicasSpec bounds the agent's replica count; the HorizontalPodAutoscaler moves between min and max following
// metric. Scale: replicas.max counts against the TenantQuota's maxTotalReplicas, maxReplicasPerAgent and, times
// the pod's GPU limit, maxGPUs.
type ReplicasSpec struct {
	// Min is the lowest replica count, and the stable Deployment's replicas when it is created.
	// +required
	// +kubebuilder:validation:Minimum=1
	Min int32 `json:"min"`
	// Max is the highest replica count the HPA may reach (further capped by the TenantQuota).
	// +required
	// +kubebuilder:validation:Minimum=1
	Max int32 `json:"max"`
	// Metric is the external metric the HPA follows: queueDepth (agentrax_queue_depth) or gpuUtilization
	// (agentrax_gpu_utilization).
	// +required
	Metric ScalingMetric `json:"metric"`
	// Target is the value of the metric one pod should carry: the HPA runs ceil(sum of the metric over the
	// agent's pods ÷ target) replicas (e.g. 10 pods at 90 % GPU against 70 → 13), within min and max.
	// +required
	// +kubebuilder:validation:Minimum=1
	Target int32 `json:"target"`
}

// PauseStep waits before the next step while the canary's metrics are evaluated.
type PauseStep struct {
	// Duration of the pause, e.g. 2m.
	// +required
	Duration metav1.Duration `json:"duration"`
}

// RolloutStep is one step of a canary rollout: exactly one of setWeight and pause.
type RolloutStep struct {
	// SetWeight sends this percentage of traffic to the canary.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SetWeight *int32 `json:"setWeight,omitempty"`
	// Pause holds the rollout for a while and evaluates the canary's metrics.
	// +optional
	Pause *PauseStep `json:"pause,omitempty"`
}

// RollbackSpec sets the thresholds that roll a canary back; required with strategy Canary.
type RollbackSpec struct {
	// MaxErrorRate is the highest share of 5xx responses tolerated, as a percentage: "2%", "0.5%".
	// +required
	// +kubebuilder:validation:MinLength=2
	MaxErrorRate string `json:"maxErrorRate"`
	// MaxP99LatencyMs is the highest tolerated 99th-percentile latency in milliseconds.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxP99LatencyMs int32 `json:"maxP99LatencyMs"`
	// MinRequestSample is how many canary requests must be seen before the thresholds are evaluated.
	// +required
	// +kubebuilder:validation:Minimum=1
	MinRequestSample int32 `json:"minRequestSample"`
	// OnInsufficientSamples is what happens when a pause, extended up to min(3× its duration, 15m), still has
	// fewer than minRequestSample canary requests (or no latency data): Hold (the default) keeps the canary at its
	// weight with condition SampleInsufficient and never promotes it unevaluated; Rollback rolls it back.
	// +optional
	// +kubebuilder:default=Hold
	OnInsufficientSamples InsufficientSamplesPolicy `json:"onInsufficientSamples,omitempty"`
}

// RolloutSpec says how image changes are rolled out.
type RolloutSpec struct {
	// Strategy is Recreate (the default) or Canary.
	// +optional
	// +kubebuilder:default=Recreate
	Strategy RolloutStrategy `json:"strategy,omitempty"`
	// Abort, when true, rolls the canary running when it is seen back at once and records its image in
	// status.abortedVersion; it does not touch later canaries (set it false and true again to abort another).
	// +optional
	Abort bool `json:"abort,omitempty"`
	// Steps of a canary rollout; at least one must be setWeight: 100 and at least one a pause (only pauses judge
	// the canary).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Steps []RolloutStep `json:"steps,omitempty"`
	// Rollback thresholds; required with strategy Canary.
	// +optional
	Rollback *RollbackSpec `json:"rollback,omitempty"`
	// Traffic says which HTTPRoute splits traffic between stable and canary. Without it no canary is started
	// (condition RolloutHealthy Unknown, reason NoTrafficRoute): a canary nobody sends requests to cannot be judged.
	// +optional
	Traffic *TrafficSpec `json:"traffic,omitempty"`
	// Metrics names the series and labels the canary analysis queries.
	// +optional
	Metrics *CanaryMetricsSpec `json:"metrics,omitempty"`
	// ProgressDeadline bounds every wait of a canary rollout (canary pods becoming available, the route accepting
	// new weights, quota room for the canary); past it the canary is rolled back as failed with reason
	// ProgressDeadlineExceeded. Pauses are not waits: they end by analysis. Between 1s and 24h; 10m by default.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="must be from 1s to 24h"
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`
}

// MCPSpec publishes the agent in the MCP discovery registry.
type MCPSpec struct {
	// Expose registers the agent in the MCP discovery registry once it runs.
	// +optional
	Expose bool `json:"expose,omitempty"`
	// Tools the agent offers, merged with the tools it reports; names are unique and non-empty.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Tools []string `json:"tools,omitempty"`
	// Path is the HTTP path of the agent's MCP endpoint (Streamable HTTP) on spec.port; /mcp by default.
	// +optional
	// +kubebuilder:default="/mcp"
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$`
	Path string `json:"path,omitempty"`
}

// AgentDeploymentSpec is the desired state of an AI agent workload.
type AgentDeploymentSpec struct {
	// Image is the agent's container image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image"
	Image string `json:"image"`
	// Port the agent listens on for HTTP (and MCP); 8080 by default.
	// +optional
	// +kubebuilder:default=8080
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Port"
	Port int32 `json:"port,omitempty"`
	// TenantRef names the TenantQuota, in the same namespace, this agent is charged to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Tenant Quota"
	TenantRef string `json:"tenantRef"`
	// Replicas bounds the autoscaled replica count.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas"
	Replicas ReplicasSpec `json:"replicas"`
	// Rollout says how image changes are rolled out.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Rollout"
	Rollout *RolloutSpec `json:"rollout,omitempty"`
	// MCP publishes the agent in the MCP discovery registry.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="MCP"
	MCP *MCPSpec `json:"mcp,omitempty"`
	// Resources of the agent container. limits[<--gpu-resource-name>] (nvidia.com/gpu by default) times
	// replicas.max is charged to the TenantQuota's maxGPUs.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources"
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// Env of the agent container.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Environment"
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Args of the agent container.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Arguments"
	Args []string `json:"args,omitempty"`
	// ReadinessProbe of the agent container (stable and canary pods): a pod gets traffic only while it passes, and
	// a canary whose pods stop passing it is unavailable, which rolls it back at the next analysis. Without it a
	// pod is ready as soon as its container starts (a pod still loading a model would get traffic and be judged).
	// A port may be named: the agent's port is called "http".
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Readiness probe"
	ReadinessProbe *corev1.Probe `json:"readinessProbe,omitempty"`
	// StartupProbe of the agent container: the readiness probe (and the canary's analysis, which waits for
	// available pods) starts only once it passed, so a slow warm-up (a model loading) is neither restarted nor
	// judged. successThreshold must be 1.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Startup probe"
	StartupProbe *corev1.Probe `json:"startupProbe,omitempty"`
}

// AgentDeploymentStatus is the observed state of an AgentDeployment.
type AgentDeploymentStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the high-level lifecycle state.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase"
	Phase Phase `json:"phase,omitempty"`
	// CurrentReplicas is the stable Deployment's replica count.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Current Replicas"
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`
	// StableVersion is the image of the stable Deployment.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Stable Version"
	StableVersion string `json:"stableVersion,omitempty"`
	// Stage of the running canary rollout: Progressing, Promoting, RollingBack; empty when none runs.
	// +optional
	Stage RolloutStage `json:"stage,omitempty"`
	// CanaryVersion is the image of the canary Deployment while a canary runs.
	// +optional
	CanaryVersion string `json:"canaryVersion,omitempty"`
	// CanaryWeight is the percentage of traffic sent to the canary (0–100).
	// +optional
	CanaryWeight int32 `json:"canaryWeight,omitempty"`
	// CanaryStepIndex is the current rollout step, persisted so a restarted controller resumes there.
	// +optional
	CanaryStepIndex int32 `json:"canaryStepIndex,omitempty"`
	// PauseStartedAt is when the current pause step began.
	// +optional
	PauseStartedAt *metav1.Time `json:"pauseStartedAt,omitempty"`
	// PromUnreachableSince is when Prometheus became unreachable during a rollout (fail-safe timer).
	// +optional
	PromUnreachableSince *metav1.Time `json:"promUnreachableSince,omitempty"`
	// WaitingSince is when the rollout began waiting for something outside it (canary pods, route acceptance,
	// quota room) without progress; the progress deadline counts from it.
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
	// BaselineReplicas is the stable replica count when the canary started; the canary is sized against it so
	// the stable HPA scaling down as traffic leaves does not shrink the canary taking that traffic.
	// +optional
	BaselineReplicas int32 `json:"baselineReplicas,omitempty"`
	// AbortedVersion is the image whose canary was last rolled back (breach, fail-safe, abort, progress
	// deadline); it is not tried again until spec.image names another image, or the agentrax.io/retry-rollout
	// annotation gets a new value.
	// +optional
	AbortedVersion string `json:"abortedVersion,omitempty"`
	// RetriedRollout is the agentrax.io/retry-rollout annotation value last acted on.
	// +optional
	RetriedRollout string `json:"retriedRollout,omitempty"`
	// AbortLatched records that the current spec.rollout.abort=true has been acted on, so it does not also abort
	// the next canary. Cleared when abort is seen false.
	// +optional
	AbortLatched bool `json:"abortLatched,omitempty"`
	// Registered tells whether the agent is in the MCP discovery registry.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Registered"
	Registered bool `json:"registered,omitempty"`
	// Conditions: Ready, Reconciled, ImagePullFailed, QuotaLimited, MCPHandshakeFailed, SampleInsufficient,
	// RolloutHealthy.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// AgentDeployment runs an AI agent or LLM inference workload: a stable Deployment and Service, an autoscaler
// capped by the tenant's quota, metrics scraping and (with strategy Canary) metric-gated canary rollouts.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={agentrax},shortName=ad
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Stable",type=string,JSONPath=`.status.stableVersion`
// +kubebuilder:printcolumn:name="Registered",type=boolean,JSONPath=`.status.registered`
// +kubebuilder:printcolumn:name="Canary",type=string,JSONPath=`.status.canaryVersion`,priority=1
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.status.canaryWeight`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Agent Deployment",resources={{Deployment,v1,""},{Service,v1,""},{HorizontalPodAutoscaler,v2,""},{PodMonitor,v1,""},{HTTPRoute,v1,""}}
type AgentDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AgentDeploymentSpec `json:"spec"`
	// +optional
	Status AgentDeploymentStatus `json:"status,omitempty"`
}

// AgentDeploymentList is a list of AgentDeployments.
// +kubebuilder:object:root=true
type AgentDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AgentDeployment `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &AgentDeployment{}, &AgentDeploymentList{})
}
