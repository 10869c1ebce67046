package stage

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// KubeServed is an Authenticator.Served that reads the cluster (its reader needs get on namespaces and on
// katastroma.org tenants): a Platform serves a namespace for a tenant when the namespace carries that tenant's
// label and the Tenant has set it up (its status lists it) — the same claim that earns the source stage its
// RoleBinding there — and the namespace is none of the Platform's own (platformNamespaces). A tenant label
// alone, which anyone creating a namespace can set, is not enough; nor is the name of a namespace the Platform
// runs in, where its stage identities live.
func KubeServed(c client.Reader, platformNamespaces []string) func(ctx context.Context, namespace, tenant string) error {
	return func(ctx context.Context, namespace, tenant string) error {
		if slices.Contains(platformNamespaces, namespace) {
			return fmt.Errorf("%s is the Platform's own namespace", namespace)
		}
		ns := &corev1.Namespace{}
		if err := c.Get(ctx, types.NamespacedName{Name: namespace}, ns); err != nil {
			return fmt.Errorf("reading the namespace: %w", err)
		}
		if got := ns.Labels[gitopsv1alpha1.LabelTenant]; got != tenant {
			return fmt.Errorf("the namespace is labelled %s=%q, not for tenant %s", gitopsv1alpha1.LabelTenant, got, tenant)
		}
		t := &gitopsv1alpha1.Tenant{}
		if err := c.Get(ctx, types.NamespacedName{Name: tenant}, t); err != nil {
			return fmt.Errorf("reading Tenant %s: %w", tenant, err)
		}
		if !slices.Contains(t.Status.Namespaces, namespace) {
			return fmt.Errorf("tenant %s has not claimed it (status.namespaces)", tenant)
		}
		return nil
	}
}
