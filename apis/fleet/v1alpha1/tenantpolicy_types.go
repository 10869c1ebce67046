package v1alpha1

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TenantPolicy condition vocabulary.
const (
	ConditionValid = "Valid"

	ReasonValid      = "Valid"
	ReasonParseError = "ParseError"
)

// TenantPolicySpec confines the fleet objects its subjects write to the collectors its required matchers select.
type TenantPolicySpec struct {
	// Subjects the policy binds: User (by name), Group (by membership) or ServiceAccount (name and namespace).
	// +required
	// +kubebuilder:validation:MinItems=1
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Subjects"
	Subjects []rbacv1.Subject `json:"subjects"`
	// RequiredMatchers: every Pipeline, RemoteAttributePolicy, ExternalAttributeSync and CollectorDiscovery a bound
	// subject writes must contain at least one of them (exactly, after normalising quotes and spaces), across the
	// union of every policy binding the subject. Matchers are ANDed, so one required matcher confines the object.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=200
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Required Matchers"
	RequiredMatchers []string `json:"requiredMatchers"`
	// NamespaceSelector limits the policy to objects in namespaces with these labels; unset means every
	// namespace. When the object's namespace cannot be read, admission refuses the request (fail closed).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Namespace Selector"
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// TenantPolicyStatus says whether the policy parses.
type TenantPolicyStatus struct {
	// ObservedGeneration is the generation last validated.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// BoundSubjectCount is how many subjects the policy binds.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Bound Subjects"
	BoundSubjectCount int32 `json:"boundSubjectCount,omitempty"`
	// Conditions: Valid (Valid/ParseError) and Ready, which mirrors Valid.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TenantPolicy binds users, groups and service accounts to matchers that every fleet object they write must
// carry (enforced at admission unless --enable-tenant-policy-enforcement=false).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fmtp,categories={fleet}
// +kubebuilder:printcolumn:name="Subjects",type=integer,JSONPath=`.status.boundSubjectCount`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Fleet Tenant Policy",resources={{Event,v1,""}}
type TenantPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TenantPolicySpec `json:"spec"`
	// +optional
	Status TenantPolicyStatus `json:"status,omitempty"`
}

// TenantPolicyList is a list of TenantPolicies.
// +kubebuilder:object:root=true
type TenantPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TenantPolicy `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &TenantPolicy{}, &TenantPolicyList{})
}
