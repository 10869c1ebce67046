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

// Reservation is what one admitted AgentDeployment holds against the quota. The admission webhook writes
// reservations with a resourceVersion precondition, so concurrent admissions by any number of webhook replicas
// are serialized by the API server; the TenantQuota controller settles them to the agents' actual demand.
type Reservation struct {
	// Name of the AgentDeployment.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Replicas reserved: replicas.max (+1 while a canary runs).
	// +required
	Replicas int32 `json:"replicas"`
	// GPUs reserved: the pod's GPU limit times Replicas.
	// +required
	GPUs int64 `json:"gpus"`
	// ReservedAt is when the reservation was last raised by admission; younger reservations are never settled
	// down, as their object may still be on its way to storage.
	// +required
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
	// Reservations is the admission ledger, one entry per admitted AgentDeployment, sorted by name. It is the
	// authoritative record admission checks against; do not edit it by hand.
	// +optional
	// +listType=map
	// +listMapKey=name
	Reservations []Reservation `json:"reservations,omitempty"`
	// Conditions: Ready, OverQuota.
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
