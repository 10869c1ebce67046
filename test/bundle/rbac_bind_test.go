package bundle

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/quartet-dev/quartet-operator/internal/gitops/platform"
)

// TestOperatorBindsOnlyShippedClusterRoles: the operator neither creates ClusterRoles nor holds escalate on
// cluster RBAC; it may bind exactly the gitops stages' ClusterRoles, which the bundle ships under the names the
// Platform controller binds and with the rules the stages need.
func TestOperatorBindsOnlyShippedClusterRoles(t *testing.T) {
	g := NewWithT(t)
	spec := csv(t).Spec.InstallStrategy.StrategySpec
	var bindable []string
	for _, p := range append(slices.Clone(spec.ClusterPermissions), spec.Permissions...) {
		for i, r := range p.Rules {
			if !slices.Contains(r.APIGroups, rbacv1.GroupName) {
				continue
			}
			cluster := slices.Contains(r.Resources, "clusterroles") || slices.Contains(r.Resources, "clusterrolebindings")
			if cluster {
				g.Expect(r.Verbs).NotTo(ContainElement("escalate"), "%s rule %d: escalate on cluster RBAC", p.ServiceAccountName, i)
			}
			if slices.Contains(r.Resources, "clusterroles") {
				g.Expect(r.Verbs).NotTo(ContainElements("create", "update", "patch"),
					"%s rule %d: the operator must not write ClusterRoles", p.ServiceAccountName, i)
			}
			if cluster && slices.Contains(r.Verbs, "bind") {
				g.Expect(r.ResourceNames).NotTo(BeEmpty(), "%s rule %d: bind on every ClusterRole", p.ServiceAccountName, i)
				g.Expect(r.Resources).To(Equal([]string{"clusterroles"}), "%s rule %d", p.ServiceAccountName, i)
				bindable = append(bindable, r.ResourceNames...)
			}
		}
	}
	var want []string
	for _, cr := range platform.ShippedClusterRoles() {
		want = append(want, cr.Name)
	}
	g.Expect(bindable).To(ConsistOf(want), "bind is granted on exactly the shipped ClusterRoles")

	shipped := map[string]*rbacv1.ClusterRole{}
	for _, obj := range theBundle(t).Objects {
		if obj.GetKind() == "ClusterRole" {
			cr := &rbacv1.ClusterRole{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cr)).To(Succeed())
			shipped[cr.Name] = cr
		}
	}
	for _, name := range want {
		g.Expect(shipped).To(HaveKey(name), "the bundle ships ClusterRole %s", name)
		g.Expect(shipped[name].Rules).To(Equal(platform.ShippedRules(name)), "rules of %s", name)
	}
}
