package tenant

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func policy(name string, subjects []rbacv1.Subject, required []string, nsSel *metav1.LabelSelector) fleetv1alpha1.TenantPolicy {
	return fleetv1alpha1.TenantPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: fleetv1alpha1.TenantPolicySpec{Subjects: subjects, RequiredMatchers: required, NamespaceSelector: nsSel}}
}

func TestSubjectMatches(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a", "system:authenticated"}}
	sa := authenticationv1.UserInfo{Username: "system:serviceaccount:ci:deployer"}
	cases := []struct {
		name string
		s    rbacv1.Subject
		u    authenticationv1.UserInfo
		want bool
	}{
		{"user by name", rbacv1.Subject{Kind: "User", Name: "alice"}, alice, true},
		{"other user", rbacv1.Subject{Kind: "User", Name: "bob"}, alice, false},
		{"group membership", rbacv1.Subject{Kind: "Group", Name: "team-a"}, alice, true},
		{"group is not a user name", rbacv1.Subject{Kind: "Group", Name: "alice"}, alice, false},
		{"service account", rbacv1.Subject{Kind: "ServiceAccount", Namespace: "ci", Name: "deployer"}, sa, true},
		{"service account in another namespace", rbacv1.Subject{Kind: "ServiceAccount", Namespace: "prod", Name: "deployer"}, sa, false},
		{"service account needs its namespace", rbacv1.Subject{Kind: "ServiceAccount", Name: "deployer"}, sa, false},
		{"user named like a service account is only a user subject", rbacv1.Subject{Kind: "User", Name: "system:serviceaccount:ci:deployer"}, sa, true},
		{"empty names match nothing", rbacv1.Subject{Kind: "User"}, authenticationv1.UserInfo{}, false},
		{"unknown kind", rbacv1.Subject{Kind: "Robot", Name: "alice"}, alice, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(SubjectMatches(tc.s, tc.u)).To(Equal(tc.want))
		})
	}
}

func TestApplicable(t *testing.T) {
	alice := authenticationv1.UserInfo{Username: "alice", Groups: []string{"team-a"}}
	prodOnly := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	policies := []fleetv1alpha1.TenantPolicy{
		policy("everywhere", []rbacv1.Subject{{Kind: "Group", Name: "team-a"}}, []string{`team="a"`}, nil),
		policy("prod", []rbacv1.Subject{{Kind: "User", Name: "alice"}}, []string{`env="prod"`}, prodOnly),
		policy("bob", []rbacv1.Subject{{Kind: "User", Name: "bob"}}, []string{`team="b"`}, nil),
	}
	labels := func(l map[string]string) func() (map[string]string, error) {
		return func() (map[string]string, error) { return l, nil }
	}
	cases := []struct {
		name    string
		user    authenticationv1.UserInfo
		ns      func() (map[string]string, error)
		want    []string
		wantErr bool
	}{
		{"selector matches", alice, labels(map[string]string{"env": "prod"}), []string{"everywhere", "prod"}, false},
		{"selector does not match", alice, labels(map[string]string{"env": "dev"}), []string{"everywhere"}, false},
		{"unreadable namespace fails closed", alice, func() (map[string]string, error) { return nil, errors.New("boom") }, nil, true},
		{"unbound user", authenticationv1.UserInfo{Username: "carol"}, func() (map[string]string, error) { panic("not read") }, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := Applicable(policies, tc.user, tc.ns)
			if tc.wantErr {
				g.Expect(err).To(MatchError(ContainSubstring("boom")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			g.Expect(names).To(Equal(tc.want))
		})
	}
	// An invalid selector refuses too.
	bad := []fleetv1alpha1.TenantPolicy{policy("bad", []rbacv1.Subject{{Kind: "User", Name: "alice"}}, []string{`a="b"`},
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Bogus"}}})}
	_, err := Applicable(bad, alice, labels(nil))
	NewWithT(t).Expect(err).To(HaveOccurred())
}

func TestCheckSelector(t *testing.T) {
	a := policy("a", nil, []string{`team="a"`}, nil)
	a2 := policy("a2", nil, []string{`tenant =~ "a"`}, nil)
	bound := []*fleetv1alpha1.TenantPolicy{&a, &a2}
	path := field.NewPath("spec", "selector")
	cases := []struct {
		name     string
		policies []*fleetv1alpha1.TenantPolicy
		matchers []string
		ids      []string
		want     []string
	}{
		{"not tenanted", nil, nil, []string{"x"}, nil},
		{"required matcher present", bound, []string{`env="prod"`, `team="a"`}, nil, nil},
		{"spelling does not matter", bound, []string{`team = a`}, nil, nil},
		{"union of policies", bound, []string{`tenant=~"a"`}, nil, nil},
		{"missing", bound, []string{`env="prod"`}, nil, []string{"spec.selector.matchers"}},
		{"a regex that includes the value is not the matcher", bound, []string{`team=~"a|b"`}, nil, []string{"spec.selector.matchers"}},
		{"negation is not the matcher", bound, []string{`team!="b"`}, nil, []string{"spec.selector.matchers"}},
		{"IDs forbidden", bound, []string{`team="a"`}, []string{"edge-1"}, []string{"spec.selector.collectorIDs"}},
		{"empty selector", bound, nil, nil, []string{"spec.selector.matchers"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			errs := CheckSelector(path, tc.policies, tc.matchers, tc.ids)
			var fields []string
			for _, e := range errs {
				fields = append(fields, e.Field)
				g.Expect(e.Type).To(Equal(field.ErrorTypeForbidden))
			}
			g.Expect(fields).To(Equal(tc.want))
		})
	}
	errs := CheckSelector(path, bound, nil, nil)
	NewWithT(t).Expect(errs.ToAggregate().Error()).To(ContainSubstring(`team="a"`))
}

func TestCheckCollector(t *testing.T) {
	a := policy("a", nil, []string{`team="a"`, `collector.id=~"a-.*"`}, nil)
	bound := []*fleetv1alpha1.TenantPolicy{&a}
	path := field.NewPath("spec")
	g := NewWithT(t)
	g.Expect(CheckCollector(path, nil, "x", nil)).To(BeEmpty())
	g.Expect(CheckCollector(path, bound, "x", map[string]string{"team": "a"})).To(BeEmpty())
	g.Expect(CheckCollector(path, bound, "a-1", nil)).To(BeEmpty())
	errs := CheckCollector(path, bound, "x", map[string]string{"team": "b"})
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Field).To(Equal("spec.remoteAttributes"))
}

func TestCheckCollectorCurrent(t *testing.T) {
	a := policy("a", nil, []string{`team="a"`, `collector.id=~"a-.*"`}, nil)
	bound := []*fleetv1alpha1.TenantPolicy{&a}
	path := field.NewPath("spec")
	for name, tc := range map[string]struct {
		policies []*fleetv1alpha1.TenantPolicy
		id       string
		current  map[string]string
		ok       bool
	}{
		"not tenanted":                   {nil, "x", map[string]string{"team": "b"}, true},
		"already the tenant's":           {bound, "x", map[string]string{"team": "a"}, true},
		"matched by ID":                  {bound, "a-7", nil, true},
		"another tenant's collector":     {bound, "x", map[string]string{"team": "b"}, false},
		"unlabelled collector of no one": {bound, "x", nil, false},
		"local attribute counts":         {bound, "x", map[string]string{"team": "a", "os": "linux"}, true},
	} {
		t.Run(name, func(t *testing.T) {
			errs := CheckCollectorCurrent(path, tc.policies, tc.id, tc.current)
			if tc.ok {
				NewWithT(t).Expect(errs).To(BeEmpty())
				return
			}
			NewWithT(t).Expect(errs).To(HaveLen(1))
			NewWithT(t).Expect(errs[0].Field).To(Equal("spec.id"))
		})
	}
}

func TestCheckAdoption(t *testing.T) {
	a := policy("a", nil, []string{`team="a"`}, nil)
	bound := []*fleetv1alpha1.TenantPolicy{&a}
	path := field.NewPath("metadata", "annotations").Key("import-mode")
	for name, tc := range map[string]struct {
		policies []*fleetv1alpha1.TenantPolicy
		existing []string
		ok       bool
	}{
		"not tenanted":                  {nil, []string{`team="b"`}, true},
		"the tenant's pipeline":         {bound, []string{`env="prod"`, `team = a`}, true},
		"another tenant's pipeline":     {bound, []string{`team="b"`}, false},
		"a pipeline of every collector": {bound, nil, false},
		"a regex is not the matcher":    {bound, []string{`team=~"a|b"`}, false},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			errs := CheckAdoption(path, tc.policies, "logs", tc.existing)
			if tc.ok {
				g.Expect(errs).To(BeEmpty())
				return
			}
			g.Expect(errs).To(HaveLen(1))
			g.Expect(errs[0].Field).To(Equal(`metadata.annotations[import-mode]`))
			g.Expect(errs[0].Detail).To(ContainSubstring(`"logs"`))
		})
	}
}

func TestCheckAttributeValuesAndKeys(t *testing.T) {
	a := policy("a", nil, []string{`team="a"`, `team=~"a-.*"`}, nil)
	bound := []*fleetv1alpha1.TenantPolicy{&a}
	path := field.NewPath("spec", "attributes")
	for name, tc := range map[string]struct {
		policies []*fleetv1alpha1.TenantPolicy
		attrs    map[string]string
		want     []string
	}{
		"not tenanted":                    {nil, map[string]string{"team": "b"}, nil},
		"the tenant's own value":          {bound, map[string]string{"team": "a", "tier": "1"}, nil},
		"a value one matcher accepts":     {bound, map[string]string{"team": "a-edge"}, nil},
		"unconstrained keys are free":     {bound, map[string]string{"tier": "gold", "owner": "b"}, nil},
		"another tenant's value":          {bound, map[string]string{"team": "b", "tier": "1"}, []string{"spec.attributes[team]"}},
		"an empty value leaves the slice": {bound, map[string]string{"team": ""}, []string{"spec.attributes[team]"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var fields []string
			for _, e := range CheckAttributeValues(path, tc.policies, tc.attrs) {
				fields = append(fields, e.Field)
				g.Expect(e.Detail).To(ContainSubstring(`team="a"`))
			}
			g.Expect(fields).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	keys := field.NewPath("spec", "mapping", "attributeFields")
	g.Expect(CheckAttributeKeys(keys, bound, []string{"rack", "tier"})).To(BeEmpty())
	errs := CheckAttributeKeys(keys, bound, []string{"rack", "team"})
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Field).To(Equal("spec.mapping.attributeFields[team]"))
}

func TestCheckUnregistered(t *testing.T) {
	byTeam := policy("team", nil, []string{`team="a"`}, nil)
	byID := policy("id", nil, []string{`team="a"`, `collector.id=~"a-.*"`}, nil)
	path := field.NewPath("spec")
	g := NewWithT(t)
	g.Expect(CheckUnregistered(path, nil, "anything")).To(BeEmpty())
	g.Expect(CheckUnregistered(path, []*fleetv1alpha1.TenantPolicy{&byID}, "a-7")).To(BeEmpty())
	errs := CheckUnregistered(path, []*fleetv1alpha1.TenantPolicy{&byID}, "b-7")
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[0].Field).To(Equal("spec.id"))
	g.Expect(CheckUnregistered(path, []*fleetv1alpha1.TenantPolicy{&byTeam}, "a-7")).To(HaveLen(1),
		"attributes cannot place an ID nobody has registered yet")
}
