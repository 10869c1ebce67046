// Package v1alpha1 holds the agentrax.io/v1alpha1 API: AI agent workloads: quota-checked deployments, autoscaling, metric-gated canaries and an MCP discovery registry.
// +kubebuilder:object:generate=true
// +groupName=agentrax.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "agentrax.io", Version: "v1alpha1"}

	// SchemeBuilder registers this package's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// objectTypes lists this package's kinds; each type file appends its own from init.
var objectTypes []runtime.Object

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
