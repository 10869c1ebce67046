package platform

import (
	"errors"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// grants says whether any rule allows verb on resource in group (wildcards included).
func grants(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

func TestClusterRolesGrantNoSecretsAndNoSourceWrites(t *testing.T) {
	p := platform()
	for _, tc := range []struct {
		stage         string
		allowed, deny [][3]string // group, resource, verb
	}{
		{stage: "source",
			allowed: [][3]string{{"", "configmaps", "list"}, {"", "namespaces", "get"}, {"authentication.k8s.io", "tokenreviews", "create"}},
			deny: [][3]string{{"", "secrets", "get"}, {"", "secrets", "create"}, {"", "configmaps", "create"},
				{"", "configmaps", "update"}, {"", "configmaps", "delete"}}},
		{stage: "provisioner",
			allowed: [][3]string{{"", "configmaps", "get"}, {"", "configmaps", "create"}, {"apiextensions.k8s.io", "customresourcedefinitions", "get"}},
			// Tenant objects are read through the tenant identities.
			deny: [][3]string{{"", "secrets", "get"}, {"", "secrets", "list"}, {"", "secrets", "watch"}, {"", "configmaps", "delete"},
				{"apps", "deployments", "list"}, {"example.com", "widgets", "list"}}},
		{stage: "pruner",
			allowed: [][3]string{{"", "configmaps", "get"}, {"", "configmaps", "delete"}},
			deny: [][3]string{{"", "secrets", "get"}, {"", "secrets", "list"}, {"", "configmaps", "create"},
				{"apps", "deployments", "get"}}},
	} {
		t.Run(tc.stage, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(SharedBindingName(tc.stage)).To(Equal(StageClusterRole(tc.stage)))
			g.Expect(StageSubject(p, tc.stage)).To(Equal(rbacv1.Subject{Kind: "ServiceAccount", Name: Name(tc.stage), Namespace: p.Namespace}))
			rules := ShippedRules(StageClusterRole(tc.stage))
			for _, a := range tc.allowed {
				g.Expect(grants(rules, a[0], a[1], a[2])).To(BeTrue(), "%v", a)
			}
			for _, d := range tc.deny {
				g.Expect(grants(rules, d[0], d[1], d[2])).To(BeFalse(), "%v", d)
			}
			for _, r := range rules {
				g.Expect(r.APIGroups).NotTo(ContainElement("*"))
				if slices.Contains(r.Verbs, "impersonate") {
					g.Expect(r.ResourceNames).To(Equal([]string{tc.stage}))
				}
			}
		})
	}
	// The other stages only check their callers: review tokens, read the namespace and Tenant the work names.
	for _, stage := range []string{"renderer", "orderer", "labeler", "pharos"} {
		g := NewWithT(t)
		g.Expect(StageClusterRole(stage)).To(Equal(CallerCheckClusterRole), stage)
		g.Expect(ShippedRules(CallerCheckClusterRole)).To(Equal(stageAuthRules()), stage)
		g.Expect(grants(ShippedRules(CallerCheckClusterRole), "", "secrets", "get")).To(BeFalse(), stage)
	}
}

func TestSourceTenantRoleIsNamespaced(t *testing.T) {
	g := NewWithT(t)
	p := platform()
	rb := SourceTenantRoleBinding(p, "team-a")
	g.Expect(rb.Labels).To(HaveKeyWithValue(PlatformLabel, "katastroma-system.main"))
	rules := ShippedRules(SourceTenantClusterRole)
	for _, v := range []string{"create", "update", "delete"} {
		g.Expect(grants(rules, "", "configmaps", v)).To(BeTrue(), v)
		g.Expect(grants(rules, "", "secrets", v)).To(BeTrue(), v)
	}
	g.Expect(grants(rules, "", "secrets", "list")).To(BeFalse())
	g.Expect(rb.Namespace).To(Equal("team-a"))
	// A RoleBinding to the ClusterRole grants it in this namespace only.
	g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: SourceTenantClusterRole}))
	g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "katastroma-source", Namespace: "katastroma-system"}}))
}

func TestClusterNamesDoNotCollide(t *testing.T) {
	named := func(ns, name string) *gitopsv1alpha1.Platform {
		return &gitopsv1alpha1.Platform{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	for _, tc := range []struct{ a, b *gitopsv1alpha1.Platform }{
		{named("team", "x-prod"), named("team-x", "prod")},
		{named("a", "b-c-d"), named("a-b", "c-d")},
		{named("a", "b-c-d"), named("a-b-c", "d")},
	} {
		g := NewWithT(t)
		for _, stage := range []string{"source", "provisioner", "pruner"} {
			g.Expect(SourceTenantRoleBinding(tc.a, "team").Name).To(Equal(ClusterName(tc.a, "source")))
			g.Expect(ClusterName(tc.a, stage)).NotTo(Equal(ClusterName(tc.b, stage)))
		}
	}
	NewWithT(t).Expect(ClusterName(named("team", "x-prod"), "pruner")).To(MatchRegexp(`^katastroma-team-x-prod-[0-9a-f]{8}-pruner$`))
}

func TestCheckOwner(t *testing.T) {
	p := platform()
	obj := func(rv string, labels map[string]string) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: rv, Labels: labels}}
	}
	for name, tc := range map[string]struct {
		live  *rbacv1.ClusterRole
		owner string // "" means no conflict
	}{
		"new object":           {live: obj("", nil)},
		"ours":                 {live: obj("7", map[string]string{PlatformLabel: "katastroma-system.main"})},
		"another platform":     {live: obj("7", map[string]string{PlatformLabel: "team-x.prod"}), owner: "team-x.prod"},
		"unlabelled, existing": {live: obj("7", nil), owner: "-"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := CheckOwner(p, "ClusterRole", tc.live)
			if tc.owner == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			var c *ConflictError
			g.Expect(errors.As(err, &c)).To(BeTrue())
			g.Expect(err.Error()).To(ContainSubstring("ClusterRole x belongs to"))
			if tc.owner != "-" {
				g.Expect(err.Error()).To(ContainSubstring("Platform " + tc.owner))
			} else {
				g.Expect(err.Error()).To(ContainSubstring("no Platform"))
			}
		})
	}
}
