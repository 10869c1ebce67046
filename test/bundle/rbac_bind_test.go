package bundle

import (
	"fmt"
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
	want := platform.BindableClusterRoles()
	g.Expect(bindable).To(ConsistOf(want), "bind is granted on exactly the shipped ClusterRoles")

	shipped := map[string]*rbacv1.ClusterRole{}
	for _, obj := range theBundle(t).Objects {
		if obj.GetKind() == "ClusterRole" {
			cr := &rbacv1.ClusterRole{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cr)).To(Succeed())
			shipped[cr.Name] = cr
		}
	}
	for _, cr := range platform.ShippedClusterRoles() {
		g.Expect(shipped).To(HaveKey(cr.Name), "the bundle ships ClusterRole %s", cr.Name)
		g.Expect(shipped[cr.Name].Rules).To(Equal(cr.Rules), "rules of %s", cr.Name)
		g.Expect(shipped[cr.Name].AggregationRule).To(Equal(cr.AggregationRule), "aggregation of %s", cr.Name)
	}
}

// TestCSVHasNoEscalationShapes reads the CSV's cluster-wide rules for the shapes a certification reviewer refuses:
// wildcards; escalate, bind or impersonate without resourceNames; update, patch or delete on ClusterRoles or
// ClusterRoleBindings without resourceNames; ServiceAccount tokens and pod exec. (What RBAC cannot limit by name,
// create, is confined by the escalation guard; test/olm tries every escalation as the installed ServiceAccount.)
func TestCSVHasNoEscalationShapes(t *testing.T) {
	g := NewWithT(t)
	spec := csv(t).Spec.InstallStrategy.StrategySpec
	for _, p := range spec.ClusterPermissions {
		for i, r := range p.Rules {
			where := fmt.Sprintf("%s clusterPermissions rule %d %v", p.ServiceAccountName, i, r)
			for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs} {
				g.Expect(list).NotTo(ContainElement("*"), "%s: wildcard", where)
			}
			if len(r.ResourceNames) == 0 {
				g.Expect(r.Verbs).NotTo(ContainElement(BeElementOf("escalate", "bind", "impersonate")), "%s: unnamed escalate/bind/impersonate", where)
				if slices.Contains(r.APIGroups, rbacv1.GroupName) && (slices.Contains(r.Resources, "clusterroles") || slices.Contains(r.Resources, "clusterrolebindings")) {
					g.Expect(r.Verbs).NotTo(ContainElement(BeElementOf("update", "patch", "delete")), "%s: unnamed writes of cluster RBAC", where)
				}
			}
			g.Expect(r.Resources).NotTo(ContainElement(BeElementOf("serviceaccounts/token", "pods/exec", "pods/attach", "nodes/proxy")), where)
			if slices.Contains(r.APIGroups, "admissionregistration.k8s.io") && len(r.ResourceNames) == 0 {
				g.Expect(r.Verbs).To(ConsistOf("create"), "%s: the operator may create its guard, never change an admission policy", where)
			}
		}
	}
}
