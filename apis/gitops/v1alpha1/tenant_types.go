package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels, names and conditions shared by the gitops kinds and the pipeline stages.
const (
	// LabelTenant marks a namespace (and everything the pipeline deploys) with its tenant. Admission keeps it
	// immutable once set.
	LabelTenant = "katastroma.org/tenant"
	// AnnotationCreatedBy marks a namespace a Tenant created (value: the Tenant's name). Only such namespaces are
	// deleted on prune and offboarding (the operator's escalation guard refuses any other namespace deletion by
	// it); a namespace an administrator handed over by labelling it is released instead (label and the Tenant's
	// identities removed), so a Tenant never deletes what it did not create.
	AnnotationCreatedBy = "katastroma.org/created-by"
	// AnnotationGrantedTo is an administrator's proof that an existing namespace was handed to a Tenant (value:
	// the Tenant's name), set together with LabelTenant. The operator never writes it (its escalation guard
	// refuses that), so unlike the label, which earlier versions set themselves, it cannot come from a Tenant.
	AnnotationGrantedTo = "katastroma.org/granted-to"
	// AnnotationAllowServiceTypes, set by an administrator on a tenant namespace, lists the Service types beyond
	// ClusterIP the tenant's manifests may create there (comma-separated: NodePort, LoadBalancer). Without it
	// the tenant identities' admission refuses both; spec.externalIPs is refused always (CVE-2020-8554).
	AnnotationAllowServiceTypes = "katastroma.org/allow-service-types"
	// LabelPodSecurityEnforce is Pod Security Admission's enforce label; every namespace a Tenant creates gets it.
	LabelPodSecurityEnforce = "pod-security.kubernetes.io/enforce"
	// ProvisionerServiceAccount is the tenant identity the provisioner impersonates (create, patch, update).
	ProvisionerServiceAccount = "provisioner"
	// PrunerServiceAccount is the tenant identity the pruner impersonates (delete).
	PrunerServiceAccount = "pruner"
	// WebhookSecretName is the Secret holding the GitHub webhook HMAC key in each tenant namespace.
	WebhookSecretName = "github-webhook-secret"
	// WebhookSecretKey is the key of the HMAC key in WebhookSecretName.
	WebhookSecretKey = "webhook-secret"

	// ConditionReady is True when every child of the object exists as specified.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller is still bringing children to the spec.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the controller cannot progress without a change to the spec or the cluster.
	ConditionStalled = "Stalled"

	// ReasonReconciled: every child matches the spec.
	ReasonReconciled = "Reconciled"
	// ReasonProgressing: children are being written or are not ready yet.
	ReasonProgressing = "Progressing"
	// ReasonNamespaceClaimed: a namespace of the spec belongs to another tenant.
	ReasonNamespaceClaimed = "NamespaceClaimed"
	// ReasonNamespaceNotGiven: a namespace of the spec exists and carries no tenant label: nobody handed it to
	// the tenant (an administrator does, by labelling it).
	ReasonNamespaceNotGiven = "NamespaceNotGiven"
	// ReasonNamespaceReserved: a namespace of the spec is a system namespace, the operator's, a Platform's or
	// one whose ServiceAccounts hold cluster-wide rights: no Tenant may hold it, whoever labelled it.
	ReasonNamespaceReserved = "NamespaceReserved"
	// ConditionClaimsProven is False while the Tenant holds a namespace it neither created nor was granted
	// (annotation katastroma.org/granted-to): one an earlier version took over. It keeps working; the message
	// names the namespaces an administrator marks or releases.
	ConditionClaimsProven = "ClaimsProven"
	// ReasonNamespaceNotMarked: see ConditionClaimsProven.
	ReasonNamespaceNotMarked = "NamespaceNotMarked"
	// ReasonRoleMissing: spec.resources asks for kinds the shipped tenant ClusterRoles do not grant; the message
	// names the ClusterRole an administrator must create.
	ReasonRoleMissing = "RoleMissing"
	// ReasonInvalidSpec: the spec cannot be deployed as written (the message names the field).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonWriteFailed: a child could not be written.
	ReasonWriteFailed = "WriteFailed"
	// ReasonRBACConflict: an RBAC object the Platform would write already exists and is labelled for another
	// Platform; it is left untouched (the message names it and its owner).
	ReasonRBACConflict = "RBACConflict"
)

// TenantResource is a set of resources the tenant's pipeline identities may write.
type TenantResource struct {
	// APIGroups of the resources ("" is the core group).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	APIGroups []string `json:"apiGroups"`
	// Resources are plural resource names (e.g. deployments, configmaps).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	Resources []string `json:"resources"`
}

// TenantSpec is one tenant of the gitops pipeline.
type TenantSpec struct {
	// Namespaces the tenant owns. Each is created labelled katastroma.org/tenant=<tenant name> (an existing
	// namespace is taken over only when an administrator labelled it so and annotated it
	// katastroma.org/granted-to=<tenant name>: Ready=False NamespaceNotGiven until then). System namespaces, the
	// operator's, a Platform's and any whose ServiceAccounts are bound cluster-wide are refused whatever their
	// labels (NamespaceReserved). Each gets the provisioner and pruner ServiceAccounts, their RoleBindings to the shipped tenant
	// ClusterRoles and the webhook Secret. A namespace labelled for another tenant is refused. Removing a
	// namespace from the list deletes it if the Tenant created it, and releases it otherwise.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Namespaces"
	Namespaces []string `json:"namespaces"`
	// Resources the tenant's manifests deploy. The pipeline identities get their rights from the shipped,
	// aggregated ClusterRoles quartet-operator-katastroma-tenant-provisioner (get, list, create, patch, update)
	// and -pruner (get, list, delete), never from rules the operator writes: the Tenant reports Ready=False
	// RoleMissing, naming what an administrator must grant, until those roles cover every resource listed here.
	// Empty means ConfigMaps, Secrets, Services, ServiceAccounts and Deployments, which the shipped defaults grant.
	// +optional
	// +listType=atomic
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Resources"
	Resources []TenantResource `json:"resources,omitempty"`
	// PodSecurity is the Pod Security Admission level (label pod-security.kubernetes.io/enforce) every namespace
	// the Tenant creates gets, and a namespace it holds without one is given. restricted unless lowered to
	// baseline; privileged is refused unless the operator runs with --gitops-allow-privileged-tenants. A label
	// an administrator changed is kept.
	// +optional
	// +kubebuilder:validation:Enum=restricted;baseline;privileged
	// +kubebuilder:default=restricted
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Security"
	PodSecurity string `json:"podSecurity,omitempty"`
}

// TenantStatus is what the controller observed.
type TenantStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Namespaces the tenant owns and that are fully set up.
	// +optional
	// +listType=set
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Namespaces"
	Namespaces []string `json:"namespaces,omitempty"`
	// Conditions: Ready, Reconciling, Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Tenant onboards a tenant of the gitops pipeline: its namespaces, the ServiceAccounts the provisioner and pruner
// impersonate, their RBAC and the webhook Secret. Deleting the Tenant offboards it: its namespaces are deleted.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ktnt,categories=katastroma
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.status.namespaces`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Tenant",resources={{Namespace,v1},{ServiceAccount,v1},{Role,v1},{RoleBinding,v1},{Secret,v1}}
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired tenant.
	// +required
	Spec TenantSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the Tenants.
	Items []Tenant `json:"items"`
}

func init() { objectTypes = append(objectTypes, &Tenant{}, &TenantList{}) }
