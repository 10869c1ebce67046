package gitops

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
)

// reservedError: a namespace of the spec is one no tenant may hold (tenancy.Refusal), whoever labelled it.
type reservedError struct{ why string }

func (e *reservedError) Error() string { return e.why + ": no tenant may hold it" }

// invalidSpecError: the spec cannot be acted on as written (webhooks may be off); the message names the field.
type invalidSpecError struct{ err *field.Error }

func (e *invalidSpecError) Error() string { return e.err.Error() }

func invalidSpec(err *field.Error) error {
	if err == nil {
		return nil
	}
	return &invalidSpecError{err: err}
}

// claim decides whether t may hold the existing namespace ns and, when it may, takes it over (adopt). A namespace
// refused by what lives in it (the operator's, a Platform's, one whose ServiceAccounts are bound cluster-wide) is
// refused even when it carries the Tenant's label: the admission webhook may have been off, or the namespace
// changed since.
func (r *TenantReconciler) claim(ctx context.Context, t *gitopsv1alpha1.Tenant, ns *corev1.Namespace) (tenancy.Proof, error) {
	facts, err := tenancy.Facts(ctx, r.Client, ns)
	if err != nil {
		return tenancy.NotGiven, err
	}
	if why := tenancy.Refusal(facts, r.Reserved); why != "" {
		return tenancy.NotGiven, &reservedError{why: why}
	}
	proof := tenancy.ProofOf(facts, t.Name)
	if err := r.adopt(ctx, t, ns); err != nil {
		return proof, err
	}
	return proof, nil
}

// setProofCondition reports the namespaces t holds without proof: they keep working until an administrator
// marks them granted-to or releases them.
func setProofCondition(t *gitopsv1alpha1.Tenant, unproven []string) {
	c := metav1.Condition{Type: gitopsv1alpha1.ConditionClaimsProven, Status: metav1.ConditionTrue,
		Reason: gitopsv1alpha1.ReasonReconciled, Message: "every namespace was created by the Tenant or granted to it",
		ObservedGeneration: t.Generation}
	if len(unproven) > 0 {
		c.Status, c.Reason = metav1.ConditionFalse, gitopsv1alpha1.ReasonNamespaceNotMarked
		c.Message = fmt.Sprintf("namespaces %s carry the tenant label but were neither created by the Tenant nor granted to it "+
			"(an earlier version may have taken them over): they keep working; an administrator annotates each %s=%s or "+
			"removes it from spec.namespaces", strings.Join(unproven, ", "), gitopsv1alpha1.AnnotationGrantedTo, t.Name)
	}
	meta.SetStatusCondition(&t.Status.Conditions, c)
}

// namespaceTenant maps an object to the Tenant its namespace is labelled for.
func (r *TenantReconciler) namespaceTenant(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: obj.GetNamespace()}, ns); err != nil {
		return nil
	}
	return labelledTenant(ctx, ns)
}
