package tenancy

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

func tenant(namespaces []string, resources ...gitopsv1alpha1.TenantResource) *gitopsv1alpha1.Tenant {
	return &gitopsv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: gitopsv1alpha1.TenantSpec{Namespaces: namespaces, Resources: resources}}
}

func TestValidate(t *testing.T) {
	res := func(groups, resources []string) gitopsv1alpha1.TenantResource {
		return gitopsv1alpha1.TenantResource{APIGroups: groups, Resources: resources}
	}
	for name, tc := range map[string]struct {
		t    *gitopsv1alpha1.Tenant
		want []string // substrings, one per expected error, in order
	}{
		"valid":            {tenant([]string{"team-a", "team-a-staging"}, res([]string{"", "apps"}, []string{"configmaps", "deployments"})), nil},
		"no namespace":     {tenant(nil), []string{"spec.namespaces: Required value"}},
		"bad name":         {tenant([]string{"Team_A"}), []string{"spec.namespaces[0]: Invalid value: \"Team_A\""}},
		"duplicate":        {tenant([]string{"a", "b", "a"}), []string{"spec.namespaces[2]: Duplicate value"}},
		"system namespace": {tenant([]string{"kube-system"}), []string{"spec.namespaces[0]: Forbidden: kube-system is a system or operator namespace"}},
		"any kube-":        {tenant([]string{"a", "kube-foo"}), []string{"spec.namespaces[1]: Forbidden: kube-foo"}},
		"default":          {tenant([]string{"default"}), []string{"spec.namespaces[0]: Forbidden: default"}},
		"openshift":        {tenant([]string{"openshift-monitoring"}), []string{"spec.namespaces[0]: Forbidden: openshift-monitoring"}},
		"operator namespace": {tenant([]string{"team-a", "quartet-system"}),
			[]string{"spec.namespaces[1]: Forbidden: quartet-system is a system or operator namespace"}},
		"wildcard group": {tenant([]string{"a"}, res([]string{"*"}, []string{"pods"})), []string{"spec.resources[0].apiGroups[0]: Forbidden: wildcards"}},
		"wildcard resource": {tenant([]string{"a"}, res([]string{""}, []string{"configmaps", "*"})),
			[]string{"spec.resources[0].resources[1]: Forbidden: wildcards"}},
		"escalation": {tenant([]string{"a"}, res([]string{"rbac.authorization.k8s.io"}, []string{"rolebindings"})),
			[]string{"spec.resources[0].resources[0]: Forbidden: rolebindings would let"}},
		"namespaces": {tenant([]string{"a"}, res([]string{""}, []string{"configmaps", "namespaces"})),
			[]string{"spec.resources[0].resources[1]: Forbidden: tenants may not write Namespace objects"}},
		"empty lists": {tenant([]string{"a"}, res(nil, nil)),
			[]string{"spec.resources[0].apiGroups: Required value", "spec.resources[0].resources: Required value"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errs := Validate(tc.t, "quartet-system")
			g.Expect(errs).To(HaveLen(len(tc.want)), "%v", errs)
			for i, w := range tc.want {
				g.Expect(errs[i].Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestClaims(t *testing.T) {
	for name, tc := range map[string]struct {
		owners map[string]string
		want   []string
	}{
		"free":             {map[string]string{}, nil},
		"own":              {map[string]string{"a": "team-a", "b": "team-a"}, nil},
		"another's":        {map[string]string{"b": "team-b"}, []string{"spec.namespaces[1]: Forbidden: namespace b belongs to tenant team-b"}},
		"two others":       {map[string]string{"a": "x", "b": "y"}, []string{"spec.namespaces[0]", "spec.namespaces[1]"}},
		"unlabelled owner": {map[string]string{"a": ""}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errs := Claims("team-a", []string{"a", "b"}, tc.owners)
			g.Expect(errs).To(HaveLen(len(tc.want)), "%v", errs)
			for i, w := range tc.want {
				g.Expect(errs[i].Error()).To(ContainSubstring(w))
			}
		})
	}
}

func TestLabelChange(t *testing.T) {
	l := func(v ...string) map[string]string {
		if len(v) == 0 {
			return map[string]string{"other": "x"}
		}
		return map[string]string{gitopsv1alpha1.LabelTenant: v[0]}
	}
	for name, tc := range map[string]struct {
		old, new map[string]string
		want     string
	}{
		"set the first time": {l(), l("a"), ""},
		"unchanged":          {l("a"), l("a"), ""},
		"changed":            {l("a"), l("b"), "metadata.labels[katastroma.org/tenant]: Forbidden: is immutable: it cannot change from a to b"},
		"removed":            {l("a"), l(), "metadata.labels[katastroma.org/tenant]: Forbidden: is immutable: it cannot be removed (tenant a)"},
		"never set":          {nil, nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := LabelChange(tc.old, tc.new)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

func TestRulesDefaultAndVerbs(t *testing.T) {
	g := NewWithT(t)
	rules := Rules(nil, PrunerVerbs)
	g.Expect(rules).To(HaveLen(len(DefaultResources())))
	for _, r := range rules {
		g.Expect(r.Verbs).To(Equal([]string{"get", "list", "delete"}))
	}
	// The stages read tenant objects as the tenant, but never watch: reads cover exactly what each identity writes.
	for _, r := range Rules(nil, ProvisionerVerbs) {
		g.Expect(r.Verbs).To(Equal([]string{"get", "list", "create", "patch", "update"}))
	}
}

// FuzzValidate checks that validation never panics and that whatever it accepts is a usable namespace list.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{"team-a", "a,b", "Team_A", "a,a", "kube-system", "", strings.Repeat("x", 64), "-a", "a-"} {
		f.Add(seed, "configmaps")
	}
	f.Add("a", "*")
	f.Add("a", "roles")
	f.Fuzz(func(t *testing.T, namespaces, resource string) {
		tn := tenant(strings.Split(namespaces, ","),
			gitopsv1alpha1.TenantResource{APIGroups: []string{""}, Resources: []string{resource}})
		if len(Validate(tn)) > 0 {
			return
		}
		seen := map[string]bool{}
		for _, ns := range tn.Spec.Namespaces {
			if ns == "" || len(ns) > 63 || seen[ns] || strings.ToLower(ns) != ns {
				t.Fatalf("accepted namespace %q of %q", ns, namespaces)
			}
			seen[ns] = true
		}
		if resource == "*" || resource == "" || escalating[resource] {
			t.Fatalf("accepted resource %q", resource)
		}
	})
}

func TestMissing(t *testing.T) {
	verbs := []string{"get", "create"}
	rule := func(groups, resources, verbs []string, names ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
	}
	widgets := []gitopsv1alpha1.TenantResource{{APIGroups: []string{"example.com"}, Resources: []string{"widgets", "gadgets"}}}
	for name, tc := range map[string]struct {
		resources []gitopsv1alpha1.TenantResource
		rules     []rbacv1.PolicyRule
		want      []string
	}{
		"granted":             {widgets, []rbacv1.PolicyRule{rule([]string{"example.com"}, []string{"widgets", "gadgets"}, verbs)}, nil},
		"wildcards grant":     {widgets, []rbacv1.PolicyRule{rule([]string{"*"}, []string{"*"}, []string{"*"})}, nil},
		"one verb short":      {widgets, []rbacv1.PolicyRule{rule([]string{"example.com"}, []string{"widgets", "gadgets"}, []string{"get"})}, []string{"widgets.example.com", "gadgets.example.com"}},
		"split across rules":  {widgets, []rbacv1.PolicyRule{rule([]string{"example.com"}, []string{"widgets", "gadgets"}, []string{"get"}), rule([]string{"example.com"}, []string{"widgets"}, []string{"create"})}, []string{"gadgets.example.com"}},
		"names do not count":  {widgets, []rbacv1.PolicyRule{rule([]string{"example.com"}, []string{"widgets", "gadgets"}, verbs, "one")}, []string{"widgets.example.com", "gadgets.example.com"}},
		"defaults when empty": {nil, nil, []string{"configmaps", "secrets", "services", "serviceaccounts", "deployments.apps"}},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(Missing(tc.resources, verbs, tc.rules)).To(Equal(tc.want))
		})
	}
}
