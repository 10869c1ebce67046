package tenancy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// Facts reads what Refusal and ProofOf judge about an existing namespace: the Platforms in it and the
// ClusterRoleBindings naming its ServiceAccounts. The Tenant webhook and controller both decide with it, so an
// admission answer and a reconcile never disagree about a namespace.
func Facts(ctx context.Context, r client.Reader, ns *corev1.Namespace) (Namespace, error) {
	facts := Namespace{Name: ns.Name, Labels: ns.Labels, Annotations: ns.Annotations}
	var platforms gitopsv1alpha1.PlatformList
	if err := r.List(ctx, &platforms, client.InNamespace(ns.Name)); err != nil {
		return facts, fmt.Errorf("listing the Platforms of namespace %s: %w", ns.Name, err)
	}
	for _, p := range platforms.Items {
		facts.Platforms = append(facts.Platforms, p.Name)
	}
	var crbs rbacv1.ClusterRoleBindingList
	if err := r.List(ctx, &crbs); err != nil {
		return facts, fmt.Errorf("listing ClusterRoleBindings: %w", err)
	}
	for _, crb := range crbs.Items {
		for _, s := range crb.Subjects {
			if (s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns.Name) ||
				(s.Kind == rbacv1.GroupKind && s.Name == "system:serviceaccounts:"+ns.Name) {
				facts.ClusterBound = append(facts.ClusterBound, crb.Name)
				break
			}
		}
	}
	return facts, nil
}
