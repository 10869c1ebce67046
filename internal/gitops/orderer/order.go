// Package orderer sorts manifests into apply order (forward) or delete order (reversed), and serves that as the
// OrdererService stage.
package orderer

import (
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// kindRank is the forward apply order of well-known kinds: cluster scaffolding first (Namespaces, then CRDs so
// custom resources can follow), then policy and RBAC, configuration and storage, services, workloads, routing and
// admission. Kinds not listed (custom resources) come last.
var kindRank = func() map[string]int {
	kinds := []string{
		"Namespace", "CustomResourceDefinition", "PriorityClass", "NetworkPolicy", "ResourceQuota", "LimitRange",
		"PodDisruptionBudget", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret",
		"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "Service", "DaemonSet", "Pod",
		"ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job",
		"CronJob", "IngressClass", "Ingress", "APIService", "MutatingWebhookConfiguration",
		"ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	}
	m := make(map[string]int, len(kinds))
	for i, k := range kinds {
		m[k] = i
	}
	return m
}()

// Rank is the position of an object's kind in the forward order; custom resources share the last rank.
func Rank(u *unstructured.Unstructured) int {
	if r, ok := kindRank[u.GetKind()]; ok {
		return r
	}
	return len(kindRank)
}

// IsFoundation reports kinds that other objects depend on existing and being served: Namespaces and CRDs.
func IsFoundation(u *unstructured.Unstructured) bool {
	gk := u.GroupVersionKind().GroupKind()
	return gk == schema.GroupKind{Kind: "Namespace"} ||
		gk == schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
}

// Sort orders objs in place: forward when reversed is false, the exact reverse otherwise. Within one rank objects
// are sorted by group, kind, namespace and name so the result never depends on input order.
func Sort(objs []*unstructured.Unstructured, reversed bool) {
	less := func(a, b *unstructured.Unstructured) bool {
		if ra, rb := Rank(a), Rank(b); ra != rb {
			return ra < rb
		}
		ga, gb := a.GroupVersionKind().Group, b.GroupVersionKind().Group
		if ga != gb {
			return ga < gb
		}
		if a.GetKind() != b.GetKind() {
			return a.GetKind() < b.GetKind()
		}
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	}
	sort.SliceStable(objs, func(i, j int) bool {
		if reversed {
			return less(objs[j], objs[i])
		}
		return less(objs[i], objs[j])
	})
}
