// Package guard builds and installs the operator's escalation guard: a ValidatingAdmissionPolicy, evaluated by the
// API server itself, that confines what the operator's own identity may write where RBAC cannot say it —
// RBAC cannot limit `create` to names or namespaces, so the rights to create Secrets, workloads and RoleBindings
// the controllers need would otherwise let that identity mint any ServiceAccount's token, run a pod in
// kube-system or bind a role in a namespace it does not manage. The operator may create the policy and its
// binding but never update, patch or delete them (its RBAC holds only create, and get by name), so a stolen
// operator token cannot switch the guard off.
package guard

import (
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// Name is the name of the policy and of its binding. The operator's RBAC names it in resourceNames (get only).
const Name = "quartet-operator-escalation-guard"

// Options say whose requests the guard confines and what the operator's controllers legitimately write.
type Options struct {
	// User is the operator's user name as the API server sees it (system:serviceaccount:<ns>:<name>).
	User string
	// PlatformNamespaces, when set, are the only namespaces where stage ServiceAccounts may run or be bound
	// (the manager's --gitops-platform-namespaces).
	PlatformNamespaces []string
}

// StageServiceAccountPrefix starts the name of every gitops stage ServiceAccount the Platform controller creates
// (platform.Name); the only named ServiceAccounts the operator's workloads and cluster bindings may use.
const StageServiceAccountPrefix = "katastroma-"

// BindableSubjects are the ServiceAccount names the operator may name in a RoleBinding: the tenants' pipeline
// identities and the stages bound in tenant and Platform namespaces.
var BindableSubjects = []string{gitopsv1alpha1.ProvisionerServiceAccount, gitopsv1alpha1.PrunerServiceAccount,
	StageServiceAccountPrefix + gitopsv1alpha1.StageSource, StageServiceAccountPrefix + gitopsv1alpha1.StagePharos}

// check is one validation: the expression must hold, else message explains the refusal.
type check struct{ expression, message string }

// celList renders strings as a CEL list literal.
func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// podSecurityPrefix starts Pod Security Admission's namespace labels.
const podSecurityPrefix = "pod-security.kubernetes.io/"

// reservedNamespace is true for namespaces the operator never writes workloads or bindings into.
const reservedNamespace = `(request.namespace.startsWith("kube-") || request.namespace.startsWith("openshift"))`

func checks(o Options) []check {
	platformNS, crbNS := "true", "true"
	if len(o.PlatformNamespaces) > 0 {
		platformNS = "request.namespace in " + celList(o.PlatformNamespaces)
		crbNS = "s.namespace in " + celList(o.PlatformNamespaces)
	}
	workloads := `request.resource.group == "apps" && request.resource.resource in ["deployments", "statefulsets", "daemonsets", "replicasets"]`
	sa := `(has(object.spec.template.spec.serviceAccountName) ? object.spec.template.spec.serviceAccountName : "")`
	return []check{{
		expression: `request.resource.resource != "secrets" || !has(object.type) || object.type != "kubernetes.io/service-account-token"`,
		message:    "the operator may not write ServiceAccount token Secrets: that would mint another identity's token",
	}, {
		expression: `request.resource.resource != "serviceaccounts" || request.subResource != "token"`,
		message:    "the operator may not request ServiceAccount tokens",
	}, {
		expression: "!(" + workloads + ") || !" + reservedNamespace,
		message:    "the operator may not run workloads in kube-* or openshift* namespaces",
	}, {
		expression: "!(" + workloads + ") || ((" + sa + ` == "" || ` + sa + ` == "default") && has(object.spec.template.spec.automountServiceAccountToken) && object.spec.template.spec.automountServiceAccountToken == false) || (` +
			sa + `.startsWith("` + StageServiceAccountPrefix + `") && ` + platformNS + ")",
		message: "the operator's workloads run either under the namespace's default ServiceAccount without its token " +
			"(automountServiceAccountToken: false) or under a gitops stage ServiceAccount (katastroma-*) in a Platform namespace: " +
			"never under a ServiceAccount the operator did not create",
	}, {
		expression: `request.resource.resource != "rolebindings" || (!` + reservedNamespace + ` && object.roleRef.kind == "ClusterRole" && ` +
			`object.subjects.all(s, s.kind == "ServiceAccount" && s.name in ` + celList(BindableSubjects) +
			` && (s.namespace == request.namespace || s.name == "` + StageServiceAccountPrefix + gitopsv1alpha1.StageSource + `")) && ` +
			`(has(namespaceObject.metadata.labels) && "` + gitopsv1alpha1.LabelTenant + `" in namespaceObject.metadata.labels || ` +
			`object.subjects.all(s, s.name == "` + StageServiceAccountPrefix + gitopsv1alpha1.StagePharos + `" && s.namespace == request.namespace)))`,
		message: "the operator binds roles only in tenant namespaces (labelled " + gitopsv1alpha1.LabelTenant +
			") to that namespace's pipeline identities (and a Platform's source stage), and pharos's role in its own namespace: " +
			"never in kube-* or openshift*, never a Role, never another subject",
	}, {
		expression: `request.resource.resource != "clusterrolebindings" || !has(object.subjects) || object.subjects.all(s, s.kind == "ServiceAccount" && s.name.startsWith("` +
			StageServiceAccountPrefix + `") && ` + crbNS + ")",
		message: "the operator's ClusterRoleBindings name only gitops stage ServiceAccounts (katastroma-*) of Platform namespaces",
	}, {
		expression: `request.resource.resource != "namespaces" || request.operation != "UPDATE" || ` +
			`(has(oldObject.metadata.labels) && "` + gitopsv1alpha1.LabelTenant + `" in oldObject.metadata.labels) || ` +
			`!(has(object.metadata.labels) && "` + gitopsv1alpha1.LabelTenant + `" in object.metadata.labels)`,
		message: "the operator may not label an existing namespace for a tenant: an administrator hands a namespace over by labelling it " + gitopsv1alpha1.LabelTenant,
	}, {
		// An existing Pod Security label is kept as it is (an administrator's choice); a namespace without an
		// enforce level may be given restricted or baseline (tenant namespaces from before the operator set one).
		expression: `request.resource.resource != "namespaces" || request.operation != "UPDATE" || ` +
			`(has(oldObject.metadata.labels) ? oldObject.metadata.labels.filter(k, k.startsWith("` + podSecurityPrefix + `")).all(k, has(object.metadata.labels) && k in object.metadata.labels && object.metadata.labels[k] == oldObject.metadata.labels[k]) : true) && ` +
			`(has(object.metadata.labels) ? object.metadata.labels.filter(k, k.startsWith("` + podSecurityPrefix + `")).all(k, (has(oldObject.metadata.labels) && k in oldObject.metadata.labels) || ` +
			`(k == "` + gitopsv1alpha1.LabelPodSecurityEnforce + `" && object.metadata.labels[k] in ["restricted", "baseline"])) : true)`,
		message: "the operator may not change or remove an existing namespace's Pod Security labels; it may only give a namespace " +
			"without one an enforce level of restricted or baseline",
	}, {
		expression: `request.resource.resource != "namespaces" || request.operation == "DELETE" || ` +
			`!(has(object.metadata.annotations) && "` + gitopsv1alpha1.AnnotationGrantedTo + `" in object.metadata.annotations) || ` +
			`(request.operation == "UPDATE" && has(oldObject.metadata.annotations) && "` + gitopsv1alpha1.AnnotationGrantedTo + `" in oldObject.metadata.annotations && ` +
			`oldObject.metadata.annotations["` + gitopsv1alpha1.AnnotationGrantedTo + `"] == object.metadata.annotations["` + gitopsv1alpha1.AnnotationGrantedTo + `"])`,
		message: "the operator may not mark a namespace " + gitopsv1alpha1.AnnotationGrantedTo + ": that is an administrator's proof of a hand-over",
	}, {
		expression: `request.resource.resource != "namespaces" || request.operation != "DELETE" || ` +
			`(has(oldObject.metadata.annotations) && "` + gitopsv1alpha1.AnnotationCreatedBy + `" in oldObject.metadata.annotations)`,
		message: "the operator deletes only namespaces it created for a tenant (annotation " + gitopsv1alpha1.AnnotationCreatedBy + ")",
	}}
}

func ops(o ...admissionregistrationv1.OperationType) []admissionregistrationv1.OperationType {
	return o
}

func rule(group string, resources []string, operations []admissionregistrationv1.OperationType) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: operations,
		Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: resources,
			Scope: ptr.To(admissionregistrationv1.AllScopes)},
	}}
}

// Policy is the guard for o.User: the policy and the binding that enforces it (Deny, fail closed).
func Policy(o Options) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	write := ops(admissionregistrationv1.Create, admissionregistrationv1.Update)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: Name, Labels: map[string]string{"app.kubernetes.io/name": "quartet-operator"}},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				rule("", []string{"secrets", "serviceaccounts/token"}, write),
				rule("apps", []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, write),
				rule("rbac.authorization.k8s.io", []string{"rolebindings", "clusterrolebindings"}, write),
				rule("", []string{"namespaces"}, ops(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete)),
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "operator-identity", Expression: "request.userInfo.username == " + strconv.Quote(o.User),
			}},
		},
	}
	for _, c := range checks(o) {
		policy.Spec.Validations = append(policy.Spec.Validations, admissionregistrationv1.Validation{
			Expression: c.expression, Message: c.message, Reason: ptr.To(metav1.StatusReasonForbidden),
		})
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: Name, Labels: policy.Labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding
}

// ServiceAccountUser reports whether user is a ServiceAccount's user name, and its namespace and name.
func ServiceAccountUser(user string) (ns, name string, ok bool) {
	rest, found := strings.CutPrefix(user, "system:serviceaccount:")
	if !found {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != ""
}
