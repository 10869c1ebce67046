// Package tenant is the pure logic of TenantPolicy admission: which policies bind a request's user in a
// namespace, and whether an object's selector stays inside the union of their required matchers.
package tenant

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// serviceAccountPrefix starts the user name of a ServiceAccount's token.
const serviceAccountPrefix = "system:serviceaccount:"

// SubjectMatches reports whether the subject names the user: a User by name, a Group by membership, a
// ServiceAccount by its system:serviceaccount:<namespace>:<name> user name.
func SubjectMatches(s rbacv1.Subject, u authenticationv1.UserInfo) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return s.Name != "" && u.Username == s.Name
	case rbacv1.GroupKind:
		return s.Name != "" && slices.Contains(u.Groups, s.Name)
	case rbacv1.ServiceAccountKind:
		return s.Name != "" && s.Namespace != "" && u.Username == serviceAccountPrefix+s.Namespace+":"+s.Name
	}
	return false
}

// Binds reports whether any subject of the policy names the user.
func Binds(p *fleetv1alpha1.TenantPolicy, u authenticationv1.UserInfo) bool {
	for _, s := range p.Spec.Subjects {
		if SubjectMatches(s, u) {
			return true
		}
	}
	return false
}

// Applicable returns the policies that bind the user for an object in a namespace. Namespace labels are read
// only when a binding policy has a namespaceSelector; if they cannot be read (or the selector does not parse)
// the error is returned and the caller must refuse the request: a tenant must not escape its policy because the
// namespace was unreadable.
func Applicable(policies []fleetv1alpha1.TenantPolicy, u authenticationv1.UserInfo, nsLabels func() (map[string]string, error)) ([]*fleetv1alpha1.TenantPolicy, error) {
	var out []*fleetv1alpha1.TenantPolicy
	var cached map[string]string
	read := false
	for i := range policies {
		p := &policies[i]
		if !p.DeletionTimestamp.IsZero() || !Binds(p, u) {
			continue
		}
		if p.Spec.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
			if err != nil {
				return nil, fmt.Errorf("TenantPolicy %s: namespaceSelector: %w", p.Name, err)
			}
			if !read {
				l, err := nsLabels()
				if err != nil {
					return nil, fmt.Errorf("reading the namespace for TenantPolicy %s: %w", p.Name, err)
				}
				cached, read = l, true
			}
			if !sel.Matches(labels.Set(cached)) {
				continue
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// canonical renders a matcher so that spelling differences (spaces, quotes) do not matter; a matcher that does
// not parse is compared as written.
func canonical(m string) string {
	if pm, err := fleetv1alpha1.ParseMatcher(m); err == nil {
		return pm.String()
	}
	return strings.TrimSpace(m)
}

// Required is the sorted union of the policies' required matchers, canonicalised.
func Required(policies []*fleetv1alpha1.TenantPolicy) []string {
	set := map[string]bool{}
	for _, p := range policies {
		for _, m := range p.Spec.RequiredMatchers {
			set[canonical(m)] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// CheckSelector checks an object's selector for a tenanted user: its matchers must contain one of the required
// matchers exactly (matchers are ANDed, so that one confines the whole selector, whatever regex or negation the
// others use), and it may not list collector IDs (they are ORed with the matchers and would escape them). With
// no applicable policy there is nothing to check.
func CheckSelector(path *field.Path, policies []*fleetv1alpha1.TenantPolicy, matchers, collectorIDs []string) field.ErrorList {
	if len(policies) == 0 {
		return nil
	}
	var errs field.ErrorList
	required := Required(policies)
	if !containsAny(matchers, required) {
		errs = append(errs, field.Forbidden(path.Child("matchers"), fmt.Sprintf(
			"must contain one of the matchers your TenantPolicies (%s) require: %s", names(policies), strings.Join(required, ", "))))
	}
	if len(collectorIDs) > 0 {
		errs = append(errs, field.Forbidden(path.Child("collectorIDs"), fmt.Sprintf(
			"may not be used by a user bound by a TenantPolicy (%s): IDs are ORed with the matchers and would escape them", names(policies))))
	}
	return errs
}

// CheckAdoption checks the Fleet pipeline a tenanted user's Pipeline would adopt (import-mode adopt): its current
// matchers must confine it to the tenant exactly as the CR's own must, so a tenant adopts only a pipeline it could
// have created. path names the annotation that asks for the adoption.
func CheckAdoption(path *field.Path, policies []*fleetv1alpha1.TenantPolicy, name string, existingMatchers []string) field.ErrorList {
	if len(policies) == 0 || containsAny(existingMatchers, Required(policies)) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"the Fleet pipeline %q this would adopt has matchers [%s], none of which your TenantPolicies (%s) require (%s): "+
			"a tenant may adopt only a pipeline it could have created", name, strings.Join(existingMatchers, ", "), names(policies),
		strings.Join(Required(policies), ", ")))}
}

// CheckAttributeValues checks the attribute values a tenanted user's RemoteAttributePolicy sets: a key that a
// required matcher names (team in team="a") may only be given a value that satisfies one of the required matchers
// on that key, or the policy would move the collectors it selects into another tenant's slice (team: b). Keys no
// required matcher names are free. path is the attributes map.
func CheckAttributeValues(path *field.Path, policies []*fleetv1alpha1.TenantPolicy, attrs map[string]string) field.ErrorList {
	constrained := constrainedKeys(policies)
	var errs field.ErrorList
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		ms := constrained[k]
		if len(ms) == 0 || slices.ContainsFunc(ms, func(m *fleetv1alpha1.Matcher) bool { return m.Matches(map[string]string{k: attrs[k]}) }) {
			continue
		}
		errs = append(errs, field.Forbidden(path.Key(k), fmt.Sprintf(
			"value %q does not satisfy the matchers your TenantPolicies (%s) require on %q (%s): it would move collectors out of your slice",
			attrs[k], names(policies), k, strings.Join(Required(policies), ", "))))
	}
	return errs
}

// CheckAttributeKeys checks the keys a tenanted user's ExternalAttributeSync maps: its values come from an outside
// source at run time, where no user can be asked, so a key a required matcher names may not be set by it at all.
func CheckAttributeKeys(path *field.Path, policies []*fleetv1alpha1.TenantPolicy, keys []string) field.ErrorList {
	constrained := constrainedKeys(policies)
	var errs field.ErrorList
	for _, k := range slices.Sorted(slices.Values(keys)) {
		if len(constrained[k]) > 0 {
			errs = append(errs, field.Forbidden(path.Key(k), fmt.Sprintf(
				"may not be set by a sync of a user bound by a TenantPolicy (%s): %q is the key its required matchers (%s) confine "+
					"tenants by, and a fetched value could move collectors out of your slice; set it with a RemoteAttributePolicy or the Collector",
				names(policies), k, strings.Join(Required(policies), ", "))))
		}
	}
	return errs
}

// constrainedKeys maps each attribute key a required matcher names to those matchers.
func constrainedKeys(policies []*fleetv1alpha1.TenantPolicy) map[string][]*fleetv1alpha1.Matcher {
	out := map[string][]*fleetv1alpha1.Matcher{}
	for _, m := range Required(policies) {
		if pm, err := fleetv1alpha1.ParseMatcher(m); err == nil {
			out[pm.Name] = append(out[pm.Name], pm)
		}
	}
	return out
}

// CheckCollector checks a Collector written by a tenanted user: the attributes the CR gives the collector (its
// remote attributes and collector.id) must satisfy one of the required matchers, so the collector stays inside
// the tenant's slice of the fleet.
func CheckCollector(path *field.Path, policies []*fleetv1alpha1.TenantPolicy, id string, attrs map[string]string) field.ErrorList {
	if len(policies) == 0 || matchesRequired(policies, id, attrs) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path.Child("remoteAttributes"), fmt.Sprintf(
		"must make the collector match one of the matchers your TenantPolicies (%s) require: %s", names(policies), strings.Join(Required(policies), ", ")))}
}

// CheckCollectorCurrent checks the collector as Fleet knows it now (its local and remote attributes, and
// collector.id): a tenanted user may only write a Collector for a collector already inside the tenant's slice,
// or setting matching attributes would pull another tenant's collector into scope.
func CheckCollectorCurrent(path *field.Path, policies []*fleetv1alpha1.TenantPolicy, id string, current map[string]string) field.ErrorList {
	if len(policies) == 0 || matchesRequired(policies, id, current) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path.Child("id"), fmt.Sprintf(
		"collector %q as registered in Fleet Management matches none of the matchers your TenantPolicies (%s) require (%s): "+
			"a tenant may only manage collectors already inside its scope", id, names(policies), strings.Join(Required(policies), ", ")))}
}

// CheckUnregistered checks a Collector a tenanted user writes for a collector Fleet does not know yet: the ID alone
// (collector.id, no attributes) must satisfy one of the required matchers, e.g. collector.id=~"a-.*". Otherwise a
// tenant could claim a predictable ID before its collector registers and give it the tenant's attributes.
func CheckUnregistered(path *field.Path, policies []*fleetv1alpha1.TenantPolicy, id string) field.ErrorList {
	if len(policies) == 0 || matchesRequired(policies, id, nil) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path.Child("id"), fmt.Sprintf(
		"collector %q has not registered with Fleet Management, and the ID alone matches none of the matchers your TenantPolicies "+
			"(%s) require (%s): a tenant may claim an unregistered ID only inside its scope (a collector.id matcher)",
		id, names(policies), strings.Join(Required(policies), ", ")))}
}

func containsAny(matchers, required []string) bool {
	for _, m := range matchers {
		if slices.Contains(required, canonical(m)) {
			return true
		}
	}
	return false
}

func names(policies []*fleetv1alpha1.TenantPolicy) string {
	out := make([]string, 0, len(policies))
	for _, p := range policies {
		out = append(out, p.Name)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// matchesRequired reports whether a collector with these attributes (plus collector.id) satisfies one of the
// matchers the policies require.
func matchesRequired(policies []*fleetv1alpha1.TenantPolicy, id string, attrs map[string]string) bool {
	all := maps.Clone(attrs)
	if all == nil {
		all = map[string]string{}
	}
	all["collector.id"] = id
	for _, m := range Required(policies) {
		if pm, err := fleetv1alpha1.ParseMatcher(m); err == nil && pm.Matches(all) {
			return true
		}
	}
	return false
}
