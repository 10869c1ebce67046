package bundle

import (
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// secretVerbJustifications lists the Secret verbs beyond get (and the writes the operator needs) that the manager
// may hold, each with the reason. list and watch hand over every Secret in scope, so they need one; prefer get
// through the API reader, or a label-scoped cache.
var secretVerbJustifications = map[string]string{
	"list": "gnmic-targetsource watches Secret metadata (not data) to run at once when a referenced Secret " +
		"rotates; data is then read with get, only for referenced Secrets",
	"watch": "see list",
}

// namedRules is every RBAC rule the bundle grants, named after where it comes from.
func namedRules(t *testing.T) map[string][]rbacv1.PolicyRule {
	t.Helper()
	g := NewWithT(t)
	out := map[string][]rbacv1.PolicyRule{}
	spec := csv(t).Spec.InstallStrategy.StrategySpec
	for i, p := range spec.ClusterPermissions {
		out[fmt.Sprintf("CSV clusterPermissions[%d] (%s)", i, p.ServiceAccountName)] = p.Rules
	}
	for i, p := range spec.Permissions {
		out[fmt.Sprintf("CSV permissions[%d] (%s)", i, p.ServiceAccountName)] = p.Rules
	}
	for _, obj := range theBundle(t).Objects {
		switch obj.GetKind() {
		case "ClusterRole", "Role":
			role := &rbacv1.ClusterRole{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role)).To(Succeed())
			out[obj.GetKind()+" "+obj.GetName()] = role.Rules
		}
	}
	return out
}

// TestRBACIsLeastPrivilege: no wildcards anywhere, Secrets read without list/watch unless justified, and
// impersonation only of ServiceAccounts.
func TestRBACIsLeastPrivilege(t *testing.T) {
	for source, rules := range namedRules(t) {
		t.Run(source, func(t *testing.T) {
			g := NewWithT(t)
			for i, r := range rules {
				for field, values := range map[string][]string{
					"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs,
					"resourceNames": r.ResourceNames, "nonResourceURLs": r.NonResourceURLs,
				} {
					g.Expect(values).NotTo(ContainElement(ContainSubstring("*")), "rule %d: wildcard in %s", i, field)
				}
				if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "secrets") {
					for _, verb := range r.Verbs {
						if verb == "list" || verb == "watch" {
							g.Expect(secretVerbJustifications).To(HaveKey(verb),
								"rule %d: %s on Secrets exposes every Secret in scope; justify it in secretVerbJustifications or read with get", i, verb)
						}
					}
				}
				if slices.Contains(r.Verbs, "impersonate") {
					g.Expect(r.APIGroups).To(Equal([]string{""}), "rule %d: impersonate only ServiceAccounts", i)
					g.Expect(r.Resources).To(Equal([]string{"serviceaccounts"}), "rule %d: impersonate only ServiceAccounts", i)
				}
				if slices.Contains(r.APIGroups, "apiextensions.k8s.io") {
					g.Expect(r.Verbs).NotTo(ContainElements("create", "patch", "update", "delete"),
						"rule %d: the operator must not change CRDs (OLM installs them)", i)
				}
			}
		})
	}
}

// TestManagerMeetsRestrictedPodSecurity: every Deployment in the CSV meets the Kubernetes "restricted" Pod Security
// Standard and OpenShift's restricted-v2 SCC (no fixed UID), runs read-only, and requests CPU and memory.
func TestManagerMeetsRestrictedPodSecurity(t *testing.T) {
	deployments := csv(t).Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	NewWithT(t).Expect(deployments).NotTo(BeEmpty())
	for _, d := range deployments {
		t.Run(d.Name, func(t *testing.T) {
			g := NewWithT(t)
			pod := d.Spec.Template.Spec
			g.Expect(pod.HostNetwork || pod.HostPID || pod.HostIPC).To(BeFalse(), "host namespaces")
			for _, v := range pod.Volumes {
				g.Expect(v.HostPath).To(BeNil(), "hostPath volume %s", v.Name)
			}
			psc := pod.SecurityContext
			if psc == nil {
				psc = &corev1.PodSecurityContext{}
			}
			g.Expect(psc.RunAsUser).To(BeNil(), "pod runAsUser: OpenShift assigns the UID")
			g.Expect(psc.RunAsGroup).To(BeNil(), "pod runAsGroup: OpenShift assigns the GID")
			g.Expect(psc.FSGroup).To(BeNil(), "pod fsGroup: OpenShift assigns it")
			for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
				sc := c.SecurityContext
				g.Expect(sc).NotTo(BeNil(), "container %s has no securityContext", c.Name)
				g.Expect(sc.RunAsUser).To(BeNil(), "container %s runAsUser", c.Name)
				g.Expect(sc.Privileged == nil || !*sc.Privileged).To(BeTrue(), "container %s privileged", c.Name)
				nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
				g.Expect(nonRoot).To(BeTrue(), "container %s must run as non-root", c.Name)
				seccomp := sc.SeccompProfile
				if seccomp == nil {
					seccomp = psc.SeccompProfile
				}
				g.Expect(seccomp).NotTo(BeNil(), "container %s has no seccompProfile", c.Name)
				g.Expect(seccomp.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault), "container %s seccompProfile", c.Name)
				g.Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()), "container %s allowPrivilegeEscalation", c.Name)
				g.Expect(sc.Capabilities).NotTo(BeNil(), "container %s capabilities", c.Name)
				g.Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")), "container %s must drop ALL", c.Name)
				g.Expect(sc.Capabilities.Add).To(BeEmpty(), "container %s adds capabilities", c.Name)
				g.Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), "container %s readOnlyRootFilesystem", c.Name)
				g.Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceCPU), "container %s CPU request", c.Name)
				g.Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceMemory), "container %s memory request", c.Name)
			}
		})
	}
}
