// Package v1alpha1 holds the fleetmanagement.grafana.com/v1alpha1 API: the Grafana Cloud Fleet Management API: Pipelines, Collectors, attribute policies and external attribute sources.
// +kubebuilder:object:generate=true
// +groupName=fleetmanagement.grafana.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "fleetmanagement.grafana.com", Version: "v1alpha1"}

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
