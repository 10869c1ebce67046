package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// ClusterName names a cluster-scoped child of one stage (and the source stage's Roles in tenant namespaces).
// Cluster objects cannot be owned by a namespaced Platform, so the name carries the Platform's namespace and name
// plus a short hash of "<ns>/<name>": dashes alone are ambiguous (team/x-prod and team-x/prod would share a name),
// "/" appears in neither part, so the hash tells them apart.
func ClusterName(p *gitopsv1alpha1.Platform, stage string) string {
	sum := sha256.Sum256([]byte(p.Namespace + "/" + p.Name))
	return fmt.Sprintf("katastroma-%s-%s-%s-%s", p.Namespace, p.Name, hex.EncodeToString(sum[:4]), stage)
}

// OwnerValue is the PlatformLabel value of a Platform's RBAC.
func OwnerValue(p *gitopsv1alpha1.Platform) string { return p.Namespace + "." + p.Name }

// ConflictError reports an RBAC object labelled for another Platform (or for none): the controller does not
// take it over, because rewriting it would change someone else's grants.
type ConflictError struct {
	Kind, Namespace, Name, Owner string
}

func (e *ConflictError) Error() string {
	name := e.Name
	if e.Namespace != "" {
		name = e.Namespace + "/" + e.Name
	}
	owner := "no Platform"
	if e.Owner != "" {
		owner = "Platform " + e.Owner
	}
	return fmt.Sprintf("%s %s belongs to %s (label %s); not updating it", e.Kind, name, owner, PlatformLabel)
}

// CheckOwner returns a ConflictError when an existing RBAC object (non-empty resourceVersion) is not labelled
// for p. A new object (empty resourceVersion) is always ours.
func CheckOwner(p *gitopsv1alpha1.Platform, kind string, live metav1.Object) error {
	if live.GetResourceVersion() == "" {
		return nil
	}
	if got := live.GetLabels()[PlatformLabel]; got != OwnerValue(p) {
		return &ConflictError{Kind: kind, Namespace: live.GetNamespace(), Name: live.GetName(), Owner: got}
	}
	return nil
}

// readable lists what the provisioner and pruner read with their own identity, by API group. Secrets are left
// out on purpose: RBAC cannot subtract from a wildcard, so the list is explicit. Custom resources of tenant CRDs
// are not in it (docs/gitops.md, "Platform RBAC").
var readable = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps", "serviceaccounts", "services", "endpoints",
		"pods", "persistentvolumeclaims", "persistentvolumes", "replicationcontrollers", "resourcequotas", "limitranges",
		"events"}},
	{APIGroups: []string{"apps", "batch", "autoscaling", "policy", "networking.k8s.io", "rbac.authorization.k8s.io",
		"apiextensions.k8s.io", "apiregistration.k8s.io", "admissionregistration.k8s.io", "storage.k8s.io",
		"scheduling.k8s.io", "coordination.k8s.io", "discovery.k8s.io"}, Resources: []string{"*"}},
}

// readRules returns the readable rules with the read verbs.
func readRules() []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(readable))
	for _, r := range readable {
		r = *r.DeepCopy()
		r.Verbs = []string{"get", "list", "watch"}
		out = append(out, r)
	}
	return out
}

// ClusterRole of a stage that reads the cluster, or nil. Reads use the stage's own identity (tenants have no
// read verbs); writes to tenant objects go through impersonation of exactly the tenant ServiceAccounts named
// provisioner or pruner, in any namespace (resourceNames cannot be limited to namespaces). The source stage
// writes ConfigMaps and Secrets only through SourceTenantRole, in tenant namespaces.
func ClusterRole(p *gitopsv1alpha1.Platform, stage string) *rbacv1.ClusterRole {
	impersonate := func(sa string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"},
			Verbs: []string{"impersonate"}, ResourceNames: []string{sa}}
	}
	var rules []rbacv1.PolicyRule
	switch stage {
	case gitopsv1alpha1.StageSource:
		// Finding targets (ConfigMaps of every tenant namespace) and the registration API's TokenReview.
		rules = []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			// The registration API authorises against the Tenant's spec.namespaces, not the label alone.
			{APIGroups: []string{gitopsv1alpha1.GroupVersion.Group}, Resources: []string{"tenants"}, Verbs: []string{"get"}},
		}
	case gitopsv1alpha1.StageProvisioner:
		rules = append(readRules(), impersonate(gitopsv1alpha1.ProvisionerServiceAccount),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch"}})
	case gitopsv1alpha1.StagePruner:
		rules = append(readRules(), impersonate(gitopsv1alpha1.PrunerServiceAccount),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update", "patch", "delete"}})
	default:
		return nil
	}
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ClusterName(p, stage), Labels: rbacLabels(p, stage)}, Rules: rules}
}

// rbacLabels are a stage's labels plus the owner label the finalizer selects on.
func rbacLabels(p *gitopsv1alpha1.Platform, stage string) map[string]string {
	labels := Labels(p, stage)
	labels[PlatformLabel] = OwnerValue(p)
	return labels
}

// ClusterRoleBinding binds a stage's ClusterRole to its ServiceAccount.
func ClusterRoleBinding(p *gitopsv1alpha1.Platform, stage string) *rbacv1.ClusterRoleBinding {
	cr := ClusterRole(p, stage)
	if cr == nil {
		return nil
	}
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cr.Name, Labels: cr.Labels},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name(stage), Namespace: p.Namespace}}}
}

// SourceTenantRole is the source stage's write access in one tenant namespace (a namespace labelled
// katastroma.org/tenant): leases and targets in ConfigMaps, the registration API's credential Secrets, and reads
// of the webhook and credential Secrets. Outside tenant namespaces the source handler can write nothing.
func SourceTenantRole(p *gitopsv1alpha1.Platform, namespace string) (*rbacv1.Role, *rbacv1.RoleBinding) {
	m := metav1.ObjectMeta{Namespace: namespace, Name: ClusterName(p, gitopsv1alpha1.StageSource),
		Labels: rbacLabels(p, gitopsv1alpha1.StageSource)}
	role := &rbacv1.Role{ObjectMeta: m, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update", "delete"}},
	}}
	rb := &rbacv1.RoleBinding{ObjectMeta: *m.DeepCopy(),
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: m.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name(gitopsv1alpha1.StageSource),
			Namespace: p.Namespace}}}
	return role, rb
}
