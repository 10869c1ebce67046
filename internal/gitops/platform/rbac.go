package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
)

// ClusterName names the source stage's RoleBindings in tenant namespaces. They cannot be owned by a namespaced Platform, so the name carries the Platform's namespace and name
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
	// RoleRef, when set, is the role a binding of a shipped name binds instead of the shipped one.
	RoleRef string
}

func (e *ConflictError) Error() string {
	name := e.Name
	if e.Namespace != "" {
		name = e.Namespace + "/" + e.Name
	}
	if e.RoleRef != "" {
		return fmt.Sprintf("%s %s binds %s, not the shipped role of that name; not updating it", e.Kind, name, e.RoleRef)
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

// ShippedNamePrefix is the namePrefix of config/default, which kustomize and the bundle put in front of the
// ClusterRoles of config/rbac/katastroma_stage_roles.yaml. The operator's own rules name those roles in
// resourceNames, which kustomize does not prefix, so an install must keep this prefix.
const ShippedNamePrefix = "quartet-operator-"

// The ClusterRoles shipped with the operator (config/rbac/katastroma_stage_roles.yaml) that every Platform binds:
// the operator may bind exactly these, by name, and creates no ClusterRole of its own.
const (
	SourceClusterRole       = ShippedNamePrefix + "katastroma-source"
	ProvisionerClusterRole  = ShippedNamePrefix + "katastroma-provisioner"
	PrunerClusterRole       = ShippedNamePrefix + "katastroma-pruner"
	SourceTenantClusterRole = ShippedNamePrefix + "katastroma-source-tenant"
	// PharosClusterRole is pharos's state ConfigMap, bound by a RoleBinding in its Platform's namespace.
	PharosClusterRole = ShippedNamePrefix + "katastroma-pharos"
	// CallerCheckClusterRole is what the stages with no other cluster role need to authenticate their callers
	// and check the work's namespace (stageAuthRules): renderer, orderer, labeler and pharos.
	CallerCheckClusterRole = ShippedNamePrefix + "katastroma-caller-check"
	// TenantProvisionerClusterRole and TenantPrunerClusterRole are what a tenant's pipeline identities may do in
	// its namespaces, bound there by the Tenant controller. Both are aggregated: administrators grant tenants a
	// new kind by labelling a ClusterRole of their own (AggregateToTenantProvisioner, AggregateToTenantPruner), so
	// the operator never writes a rule and never needs escalate.
	TenantProvisionerClusterRole = ShippedNamePrefix + "katastroma-tenant-provisioner"
	TenantPrunerClusterRole      = ShippedNamePrefix + "katastroma-tenant-pruner"
)

// The aggregation labels of the tenant ClusterRoles: a ClusterRole labelled "<label>: true" adds its rules to
// every tenant's provisioner (create, patch, update, get, list) or pruner (delete, get, list).
const (
	AggregateToTenantProvisioner = "katastroma.org/aggregate-to-tenant-provisioner"
	AggregateToTenantPruner      = "katastroma.org/aggregate-to-tenant-pruner"
)

// readRules are the provisioner's and pruner's own reads: source targets (leases) and inventories in ConfigMaps,
// and CRDs, whose establishment the provisioner waits for. Tenant objects are read through the impersonated
// tenant identities, so no Secret and no custom resource is readable with a stage's own identity.
func readRules() []rbacv1.PolicyRule {
	verbs := []string{"get", "list", "watch"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: verbs},
	}
}

// StageClusterRole is the name of the shipped ClusterRole a stage's ServiceAccount is bound to, or "" for the
// stages that need no cluster access.
func StageClusterRole(stage string) string {
	switch stage {
	case gitopsv1alpha1.StageSource:
		return SourceClusterRole
	case gitopsv1alpha1.StageProvisioner:
		return ProvisionerClusterRole
	case gitopsv1alpha1.StagePruner:
		return PrunerClusterRole
	case gitopsv1alpha1.StageRenderer, gitopsv1alpha1.StageOrderer, gitopsv1alpha1.StageLabeler, gitopsv1alpha1.StagePharos:
		return CallerCheckClusterRole
	}
	return ""
}

// stageAuthRules are what every stage needs to check a call (stage.Authenticator): review the caller's token, and
// read the namespace and the Tenant the work names (stage.KubeServed).
func stageAuthRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		{APIGroups: []string{gitopsv1alpha1.GroupVersion.Group}, Resources: []string{"tenants"}, Verbs: []string{"get"}},
	}
}

// ShippedClusterRoles are the ClusterRoles config/rbac ships, with their prefixed names; a test keeps the YAML
// equal to them. Reads and writes of tenant objects go through impersonation of exactly the tenant
// ServiceAccounts named provisioner or pruner, in any namespace (resourceNames cannot be limited to namespaces).
// The source stage writes ConfigMaps and Secrets only through SourceTenantClusterRole, bound in tenant namespaces.
func ShippedClusterRoles() []*rbacv1.ClusterRole {
	impersonate := func(sa string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"serviceaccounts"},
			Verbs: []string{"impersonate"}, ResourceNames: []string{sa}}
	}
	role := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	}
	aggregated := func(name, label string) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, AggregationRule: &rbacv1.AggregationRule{
			ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}}
	}
	defaults := func(name, label string, verbs []string) *rbacv1.ClusterRole {
		cr := role(name, tenancy.Rules(nil, verbs)...)
		cr.Labels = map[string]string{label: "true"}
		return cr
	}
	return []*rbacv1.ClusterRole{
		// Finding targets (ConfigMaps of every tenant namespace) and the registration API's TokenReview; the
		// registration API authorises against the Tenant's spec.namespaces, not the label alone.
		role(SourceClusterRole,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
			rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			// A caller outside the target's namespace must hold sourcetargets there itself (SubjectAccessReview).
			rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{gitopsv1alpha1.GroupVersion.Group}, Resources: []string{"tenants"}, Verbs: []string{"get"}}),
		// Both check their callers (stageAuthRules): only their Platform's stages may have them write, and only
		// for namespaces it serves.
		role(ProvisionerClusterRole, append(append(readRules(), impersonate(gitopsv1alpha1.ProvisionerServiceAccount),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch"}}),
			stageAuthRules()...)...),
		role(PrunerClusterRole, append(append(readRules(), impersonate(gitopsv1alpha1.PrunerServiceAccount),
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"update", "patch", "delete"}}),
			stageAuthRules()...)...),
		// The other stages call the API server only to check their callers.
		role(CallerCheckClusterRole, stageAuthRules()...),
		// The source stage's writes, bound in each tenant namespace (a namespace labelled katastroma.org/tenant):
		// leases and targets in ConfigMaps, the registration API's credential Secrets, and reads of the webhook and
		// credential Secrets. Outside tenant namespaces the source handler can write nothing.
		role(SourceTenantClusterRole,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "update", "patch", "delete"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "update", "delete"}}),
		// pharos's state: it creates its ConfigMap and reads and updates only that one.
		role(PharosClusterRole,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"},
				ResourceNames: []string{StateConfigMapName}}),
		aggregated(TenantProvisionerClusterRole, AggregateToTenantProvisioner),
		aggregated(TenantPrunerClusterRole, AggregateToTenantPruner),
		// What every tenant may deploy unless administrators add more (tenancy.DefaultResources).
		defaults(TenantProvisionerClusterRole+"-defaults", AggregateToTenantProvisioner, tenancy.ProvisionerVerbs),
		defaults(TenantPrunerClusterRole+"-defaults", AggregateToTenantPruner, tenancy.PrunerVerbs),
	}
}

// BindableClusterRoles are the shipped ClusterRoles the operator binds, and the only ones its RBAC lets it bind
// (resourceNames); the tenant defaults reach tenants through aggregation, not a binding.
func BindableClusterRoles() []string {
	return []string{SourceClusterRole, ProvisionerClusterRole, PrunerClusterRole, SourceTenantClusterRole,
		PharosClusterRole, CallerCheckClusterRole, TenantProvisionerClusterRole, TenantPrunerClusterRole}
}

// ShippedRules are the rules of the shipped ClusterRole name, or nil.
func ShippedRules(name string) []rbacv1.PolicyRule {
	for _, cr := range ShippedClusterRoles() {
		if cr.Name == name {
			return cr.Rules
		}
	}
	return nil
}

// rbacLabels are a stage's labels plus the owner label the finalizer selects on.
func rbacLabels(p *gitopsv1alpha1.Platform, stage string) map[string]string {
	labels := Labels(p, stage)
	labels[PlatformLabel] = OwnerValue(p)
	return labels
}

// SharedBindingName names the one ClusterRoleBinding of a stage's shipped ClusterRole: every Platform's
// ServiceAccount of that stage is a subject of it. The names are fixed so the operator's RBAC can list them in
// resourceNames for update, patch and delete; it can change no other ClusterRoleBinding.
func SharedBindingName(stage string) string { return StageClusterRole(stage) }

// SharedBindingLabels mark the shared ClusterRoleBindings as the operator's.
func SharedBindingLabels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "quartet-operator", "app.kubernetes.io/part-of": "katastroma"}
}

// SharedBindingNames are the names of every shared ClusterRoleBinding (the operator's resourceNames).
func SharedBindingNames() []string {
	return []string{SourceClusterRole, ProvisionerClusterRole, PrunerClusterRole, CallerCheckClusterRole}
}

// StageSubject is p's ServiceAccount of stage, as a subject of the stage's shared ClusterRoleBinding.
func StageSubject(p *gitopsv1alpha1.Platform, stage string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: Name(stage), Namespace: p.Namespace}
}

// SourceTenantRoleBinding grants the source stage SourceTenantClusterRole in one tenant namespace.
func SourceTenantRoleBinding(p *gitopsv1alpha1.Platform, namespace string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace,
		Name: ClusterName(p, gitopsv1alpha1.StageSource), Labels: rbacLabels(p, gitopsv1alpha1.StageSource)},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: SourceTenantClusterRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: Name(gitopsv1alpha1.StageSource),
			Namespace: p.Namespace}}}
}
