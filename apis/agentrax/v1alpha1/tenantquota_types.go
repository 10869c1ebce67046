package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantQuota condition types and reasons.
const (
	// ConditionOverQuota is True when the agents charged to the quota use more than it allows (for instance after
	// the quota was lowered). Running workloads are never deleted; new and growing agents are refused.
	ConditionOverQuota = "OverQuota"
	// ReasonExceeded is the OverQuota reason when some dimension is over its ceiling.
	ReasonExceeded = "Exceeded"
	// ReasonWithinLimits is the OverQuota reason when every dimension fits.
	ReasonWithinLimits = "WithinLimits"
	// ReasonUsageCounted is the Ready reason once usage is computed.
	ReasonUsageCounted = "UsageCounted"
	// ReasonLedgerRebuilt is the reason of the Warning event emitted when status.ledger could not be read (a hand
	// edit) and was rebuilt from the live AgentDeployments.
	ReasonLedgerRebuilt = "LedgerRebuilt"
	// ConditionLedgerReady is True once the TenantQuota controller has built status.ledger from the live
	// AgentDeployments of this very object. Until then (a new quota, one re-created, or one written by an
	// operator version that kept reservations elsewhere) admission cannot tell an empty ledger from an unbuilt
	// one, so it refuses every reservation with 429 and a one-second Retry-After, which clients retry.
	ConditionLedgerReady = "LedgerReady"
	// ReasonLedgerSettled is the LedgerReady reason once the controller has settled the ledger against the
	// live agents.
	ReasonLedgerSettled = "LedgerSettled"
)

// TenantQuotaSpec sets the ceilings of one tenant (namespace).
type TenantQuotaSpec struct {
	// MaxAgents is the number of AgentDeployments that may reference this quota.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max Agents"
	MaxAgents int32 `json:"maxAgents"`
	// MaxGPUs is the ceiling of GPU units across all agents: limits[<gpu resource>] × replicas.max, plus one
	// canary pod's GPUs while a canary rollout runs.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max GPUs"
	MaxGPUs int64 `json:"maxGPUs"`
	// MaxTotalReplicas is the ceiling of the sum of replicas.max across all agents (plus one canary replica per
	// agent while its canary rollout runs).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max Total Replicas"
	MaxTotalReplicas int32 `json:"maxTotalReplicas"`
	// MaxReplicasPerAgent caps each agent's replicas.max.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Max Replicas Per Agent"
	MaxReplicasPerAgent int32 `json:"maxReplicasPerAgent"`
}

// Reservation is what one admitted AgentDeployment holds against the quota: one entry of status.ledger,
// decoded. It is not stored as an object (see TenantQuotaStatus.Ledger); the JSON names are for tools that
// print decoded ledgers.
type Reservation struct {
	// Name of the AgentDeployment.
	Name string `json:"name"`
	// Replicas reserved: replicas.max (+1 while a canary runs).
	Replicas int32 `json:"replicas"`
	// GPUs reserved: the pod's GPU limit times Replicas.
	GPUs int64 `json:"gpus"`
	// ReservedAt is when the reservation was last raised by admission; younger reservations are never settled
	// down, as their object may still be on its way to storage.
	ReservedAt metav1.Time `json:"reservedAt"`
}

// TenantQuotaStatus is the observed usage of a TenantQuota.
type TenantQuotaStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// UsedAgents is the number of live AgentDeployments referencing this quota.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Used Agents"
	UsedAgents int32 `json:"usedAgents"`
	// UsedGPUs is the GPU units those agents claim.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Used GPUs"
	UsedGPUs int64 `json:"usedGPUs"`
	// UsedTotalReplicas is the sum of their replicas.max (plus canary replicas).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Used Total Replicas"
	UsedTotalReplicas int32 `json:"usedTotalReplicas"`
	// Ledger is the admission ledger: one reservation per admitted AgentDeployment, encoded as entries
	// "name=replicas/gpus@unixSeconds" (replicas and GPUs reserved, when admission last raised them) joined by
	// ",", sorted by name, e.g. "agent-a=3/3@1764601800,agent-b=1/0@1764601801". Admission rewrites it
	// with a compare-and-swap JSON patch (it tests the ledger it read) on every reservation, so it is one
	// compact string rather than a list of objects, which would make each write several times more expensive. It is the authoritative record
	// admission checks against; do not edit it by hand.
	// +optional
	// +kubebuilder:validation:Pattern=`^$|^[a-z0-9][-a-z0-9.]*=[0-9]+/[0-9]+@[0-9]+(,[a-z0-9][-a-z0-9.]*=[0-9]+/[0-9]+@[0-9]+)*$`
	Ledger string `json:"ledger,omitempty"`
	// Conditions: Ready, OverQuota and LedgerReady (admission reserves only once it is True).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TenantQuota caps what the AgentDeployments of one tenant may claim: agents, GPUs, total replicas and replicas
// per agent. Admission reserves against it; lowering it never deletes workloads but sets OverQuota.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={agentrax},shortName=tq
// +kubebuilder:printcolumn:name="MaxAgents",type=integer,JSONPath=`.spec.maxAgents`
// +kubebuilder:printcolumn:name="UsedAgents",type=integer,JSONPath=`.status.usedAgents`
// +kubebuilder:printcolumn:name="MaxGPUs",type=integer,JSONPath=`.spec.maxGPUs`
// +kubebuilder:printcolumn:name="UsedGPUs",type=integer,JSONPath=`.status.usedGPUs`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Tenant Quota",resources={{AgentDeployment,v1alpha1,""},{Event,v1,""}}
type TenantQuota struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TenantQuotaSpec `json:"spec"`
	// +optional
	Status TenantQuotaStatus `json:"status,omitempty"`
}

// TenantQuotaList is a list of TenantQuotas.
// +kubebuilder:object:root=true
type TenantQuotaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantQuota `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TenantQuota{}, &TenantQuotaList{})
}
