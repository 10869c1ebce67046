package tenancy

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// Namespace is what decides whether a namespace may belong to a tenant.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
	// Platforms are the gitops Platforms living in the namespace.
	Platforms []string
	// ClusterBound are the ClusterRoleBindings naming one of the namespace's ServiceAccounts (or all of them).
	ClusterBound []string
}

// Refusal says why no tenant may hold ns, "" when one may. A tenant's repository can run a pod as any
// ServiceAccount of its namespaces, so a namespace is refused by what lives in it, not only by its name: the
// system namespaces, the operator's (reserved), a Platform's (its stage identities impersonate every tenant) and
// any namespace whose ServiceAccounts hold cluster-wide rights (cert-manager, monitoring, ...).
func Refusal(ns Namespace, reserved []string) string {
	switch {
	case Reserved(ns.Name, reserved):
		return fmt.Sprintf("namespace %s is a system or operator namespace", ns.Name)
	case ns.Labels["openshift.io/run-level"] != "":
		return fmt.Sprintf("namespace %s is a system namespace (openshift.io/run-level)", ns.Name)
	case len(ns.Platforms) > 0:
		return fmt.Sprintf("namespace %s holds the gitops Platform %s: its stage identities act for every tenant",
			ns.Name, strings.Join(ns.Platforms, ", "))
	case len(ns.ClusterBound) > 0:
		return fmt.Sprintf("namespace %s has ServiceAccounts with cluster-wide rights (ClusterRoleBinding %s): a tenant could run pods as them",
			ns.Name, strings.Join(ns.ClusterBound, ", "))
	}
	return ""
}

// Proof is how a tenant came to hold an existing namespace.
type Proof int

const (
	// NotGiven means nobody handed the namespace to the tenant.
	NotGiven Proof = iota
	// Created means the Tenant created it (annotation katastroma.org/created-by).
	Created
	// Granted means an administrator labelled it for the tenant and marked it katastroma.org/granted-to.
	Granted
	// LabelOnly means it carries the tenant's label but no proof: an earlier version, which labelled namespaces
	// itself, may have taken it. It keeps working and is reported until an administrator marks or releases it.
	LabelOnly
)

// ProofOf says how tenant holds ns (by its label and annotations).
func ProofOf(ns Namespace, tenant string) Proof {
	if ns.Labels[gitopsv1alpha1.LabelTenant] != tenant {
		return NotGiven
	}
	switch tenant {
	case ns.Annotations[gitopsv1alpha1.AnnotationCreatedBy]:
		return Created
	case ns.Annotations[gitopsv1alpha1.AnnotationGrantedTo]:
		return Granted
	}
	return LabelOnly
}

// PodSecurity levels a Tenant may ask for.
const (
	PodSecurityRestricted = "restricted"
	PodSecurityBaseline   = "baseline"
	PodSecurityPrivileged = "privileged"
)

// PodSecurityLevel is the enforce level of t's namespaces: restricted unless the spec lowers it.
func PodSecurityLevel(t *gitopsv1alpha1.Tenant) string {
	if t.Spec.PodSecurity == "" {
		return PodSecurityRestricted
	}
	return t.Spec.PodSecurity
}

// ValidatePodSecurity refuses a level other than restricted and baseline, privileged unless allowPrivileged (the
// operator's --gitops-allow-privileged-tenants).
func ValidatePodSecurity(t *gitopsv1alpha1.Tenant, allowPrivileged bool) *field.Error {
	p := field.NewPath("spec", "podSecurity")
	switch level := PodSecurityLevel(t); {
	case level == PodSecurityRestricted, level == PodSecurityBaseline:
		return nil
	case level == PodSecurityPrivileged && allowPrivileged:
		return nil
	case level == PodSecurityPrivileged:
		return field.Forbidden(p, "privileged lets the tenant's manifests run pods with host access; the operator allows it only with --gitops-allow-privileged-tenants")
	default:
		return field.NotSupported(p, level, []string{PodSecurityRestricted, PodSecurityBaseline, PodSecurityPrivileged})
	}
}

// isNamespaces reports whether a TenantResource entry would let the tenant write Namespace objects.
func isNamespaces(groups []string, resource string) bool {
	return resource == "namespaces" && slices.Contains(groups, "")
}
