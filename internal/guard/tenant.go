package guard

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
)

// TenantName is the name of the policy (and binding) that confines the tenant pipeline identities. The operator
// creates it with the escalation guard and, likewise, can only get it afterwards.
const TenantName = "quartet-operator-tenant-guard"

// TenantPolicy confines what a tenant's repository can do through its pipeline identities (the provisioner and
// pruner ServiceAccounts the stages impersonate), whatever RBAC an administrator aggregates into their roles:
// no Namespace writes (a tenant would change its own Pod Security or tenant label), no Service spec.externalIPs
// (CVE-2020-8554: intercepting traffic for any address cluster-wide), and NodePort or LoadBalancer Services only
// where an administrator allowed the type on the namespace (annotation katastroma.org/allow-service-types).
func TenantPolicy() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	allowed := `namespaceObject != null && has(namespaceObject.metadata.annotations) && "` + gitopsv1alpha1.AnnotationAllowServiceTypes +
		`" in namespaceObject.metadata.annotations && namespaceObject.metadata.annotations["` + gitopsv1alpha1.AnnotationAllowServiceTypes +
		`"].split(",").exists(t, t.trim() == object.spec.type)`
	validations := []admissionregistrationv1.Validation{{
		Expression: `request.resource.resource != "namespaces"`,
		Message:    "tenant pipeline identities may not write Namespace objects: a namespace's labels decide its tenant and its Pod Security",
	}, {
		Expression: `request.resource.resource != "services" || !has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0`,
		Message: "tenant pipeline identities may not set a Service's spec.externalIPs: it intercepts traffic for those addresses " +
			"cluster-wide (CVE-2020-8554)",
	}, {
		Expression: `request.resource.resource != "services" || !has(object.spec.type) || !(object.spec.type in ["NodePort", "LoadBalancer"]) || (` + allowed + `)`,
		MessageExpression: `"tenant pipeline identities may create " + object.spec.type + " Services only where an administrator annotated the namespace ` +
			gitopsv1alpha1.AnnotationAllowServiceTypes + `: " + object.spec.type`,
	}}
	for i := range validations {
		validations[i].Reason = ptr.To(metav1.StatusReasonForbidden)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: TenantName, Labels: map[string]string{"app.kubernetes.io/name": "quartet-operator"}},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
				rule("", []string{"namespaces"}, ops(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete)),
				rule("", []string{"services"}, ops(admissionregistrationv1.Create, admissionregistrationv1.Update)),
			}},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name: "tenant-pipeline-identity",
				Expression: `request.userInfo.username.matches("^system:serviceaccount:[^:]+:(` + gitopsv1alpha1.ProvisionerServiceAccount +
					`|` + gitopsv1alpha1.PrunerServiceAccount + `)$")`,
			}},
			Validations: validations,
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: TenantName, Labels: policy.Labels},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        TenantName,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
	return policy, binding
}
