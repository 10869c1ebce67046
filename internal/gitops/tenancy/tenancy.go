// Package tenancy holds the pure rules of gitops tenancy: what a Tenant's pipeline identities may do, which
// namespaces it may claim, and that a namespace's tenant label never changes once set.
package tenancy

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// Verbs of the two tenant identities. The stages read tenant objects through these identities too (the
// provisioner lists what it applied before, the pruner reads what it deletes), so the Platform's own identity
// needs no read access to tenant kinds, Secrets and custom resources included. Each identity reads only the
// resources it may write: a tenant's manifests cannot use the pipeline to look at anything else.
var (
	ProvisionerVerbs = []string{"get", "list", "create", "patch", "update"}
	PrunerVerbs      = []string{"get", "list", "delete"}
)

// DefaultResources is what a Tenant without spec.resources may deploy.
func DefaultResources() []gitopsv1alpha1.TenantResource {
	return []gitopsv1alpha1.TenantResource{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "services", "serviceaccounts"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
	}
}

// Rules are the Role rules of one identity: verbs on every resource the tenant may deploy.
func Rules(resources []gitopsv1alpha1.TenantResource, verbs []string) []rbacv1.PolicyRule {
	if len(resources) == 0 {
		resources = DefaultResources()
	}
	rules := make([]rbacv1.PolicyRule, 0, len(resources))
	for _, r := range resources {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: slices.Clone(r.APIGroups),
			Resources: slices.Clone(r.Resources), Verbs: slices.Clone(verbs)})
	}
	return rules
}

// Missing lists, as "resource.group" (or "resource" for the core group), every resource of resources (the
// defaults when empty) on which rules do not grant all of verbs. Only rules without resourceNames count: the
// tenant's objects have names of the tenant's choosing.
func Missing(resources []gitopsv1alpha1.TenantResource, verbs []string, rules []rbacv1.PolicyRule) []string {
	if len(resources) == 0 {
		resources = DefaultResources()
	}
	var missing []string
	for _, r := range resources {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if !grants(rules, g, res, verbs) {
					name := res
					if g != "" {
						name += "." + g
					}
					missing = append(missing, name)
				}
			}
		}
	}
	return missing
}

func grants(rules []rbacv1.PolicyRule, group, resource string, verbs []string) bool {
	for _, verb := range verbs {
		granted := slices.ContainsFunc(rules, func(rule rbacv1.PolicyRule) bool {
			return len(rule.ResourceNames) == 0 && matches(rule.APIGroups, group) &&
				matches(rule.Resources, resource) && matches(rule.Verbs, verb)
		})
		if !granted {
			return false
		}
	}
	return true
}

func matches(list []string, want string) bool {
	return slices.Contains(list, want) || slices.Contains(list, rbacv1.ResourceAll)
}

// escalating are resources that would let a tenant's manifests widen their own permissions.
var escalating = map[string]bool{"roles": true, "rolebindings": true, "clusterroles": true, "clusterrolebindings": true}

// Reserved reports whether a tenant may not claim ns: system namespaces (default, kube-*, openshift-*) and the
// names in reserved (the operator's own namespace, given by the manager). A tenant owning the operator's
// namespace could deploy into it with the pipeline's identities.
func Reserved(ns string, reserved []string) bool {
	return ns == "default" || strings.HasPrefix(ns, "kube-") || strings.HasPrefix(ns, "openshift-") ||
		ns == "openshift" || slices.Contains(reserved, ns)
}

// Validate checks a Tenant's spec; messages name the field. reserved are namespaces no tenant may claim besides
// the system ones.
func Validate(t *gitopsv1alpha1.Tenant, reserved ...string) field.ErrorList {
	var errs field.ErrorList
	nsPath := field.NewPath("spec", "namespaces")
	if len(t.Spec.Namespaces) == 0 {
		errs = append(errs, field.Required(nsPath, "a tenant needs at least one namespace"))
	}
	seen := map[string]bool{}
	for i, ns := range t.Spec.Namespaces {
		p := nsPath.Index(i)
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, field.Invalid(p, ns, msg))
		}
		if seen[ns] {
			errs = append(errs, field.Duplicate(p, ns))
		}
		seen[ns] = true
		if Reserved(ns, reserved) {
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("%s is a system or operator namespace", ns)))
		}
	}
	for i, r := range t.Spec.Resources {
		p := field.NewPath("spec", "resources").Index(i)
		if len(r.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "name the API groups (\"\" is the core group)"))
		}
		if len(r.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "name the resources"))
		}
		for j, g := range r.APIGroups {
			if g == "*" {
				errs = append(errs, field.Forbidden(p.Child("apiGroups").Index(j), "wildcards are not allowed: list the groups"))
			}
		}
		for j, res := range r.Resources {
			rp := p.Child("resources").Index(j)
			switch {
			case res == "*":
				errs = append(errs, field.Forbidden(rp, "wildcards are not allowed: list the resources"))
			case isNamespaces(r.APIGroups, res):
				errs = append(errs, field.Forbidden(rp, "tenants may not write Namespace objects: they would change their own Pod Security and tenant labels"))
			case escalating[res]:
				errs = append(errs, field.Forbidden(rp, res+" would let the tenant's manifests widen their own permissions"))
			case res == "":
				errs = append(errs, field.Required(rp, "a resource name"))
			}
		}
	}
	return errs
}

// Claims checks that tenant may own its namespaces: owners maps a namespace to the tenant that already holds it
// (its katastroma.org/tenant label, or another Tenant listing it). Holding it itself is fine.
func Claims(tenant string, namespaces []string, owners map[string]string) field.ErrorList {
	var errs field.ErrorList
	for i, ns := range namespaces {
		if owner := owners[ns]; owner != "" && owner != tenant {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "namespaces").Index(i),
				fmt.Sprintf("namespace %s belongs to tenant %s", ns, owner)))
		}
	}
	return errs
}

// LabelChange checks a namespace update: once the tenant label is set it may be neither changed nor removed.
func LabelChange(oldLabels, newLabels map[string]string) *field.Error {
	old, had := oldLabels[gitopsv1alpha1.LabelTenant]
	if !had {
		return nil
	}
	p := field.NewPath("metadata", "labels").Key(gitopsv1alpha1.LabelTenant)
	now, has := newLabels[gitopsv1alpha1.LabelTenant]
	switch {
	case !has:
		return field.Forbidden(p, fmt.Sprintf("is immutable: it cannot be removed (tenant %s)", old))
	case now != old:
		return field.Forbidden(p, fmt.Sprintf("is immutable: it cannot change from %s to %s", old, now))
	}
	return nil
}
