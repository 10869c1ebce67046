package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// TenantPolicyControllerName is the controller name, unique across groups.
const TenantPolicyControllerName = "fleet-tenantpolicy"

// TenantPolicyReconciler re-validates each TenantPolicy and mirrors the result into its status. Enforcement
// happens at admission; this controller makes no Fleet call.
type TenantPolicyReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
}

// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=tenantpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=tenantpolicies/status,verbs=get;update;patch

// Reconcile validates the policy and patches status once, when it changed.
func (r *TenantPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &fleetv1alpha1.TenantPolicy{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := p.DeepCopy()
	p.Status.ObservedGeneration = p.Generation
	p.Status.BoundSubjectCount = int32(len(p.Spec.Subjects))
	status, reason := metav1.ConditionTrue, fleetv1alpha1.ReasonValid
	msg := fmt.Sprintf("%d subject(s) bound to %d required matcher(s)", len(p.Spec.Subjects), len(p.Spec.RequiredMatchers))
	// Admission validates too, but a policy stored before the webhook ran (or with enforcement off) may not.
	if errs := fleetv1alpha1.ValidateTenantPolicy(p); len(errs) > 0 {
		status, reason, msg = metav1.ConditionFalse, fleetv1alpha1.ReasonParseError, errs.ToAggregate().Error()
		if !meta.IsStatusConditionPresentAndEqual(p.Status.Conditions, fleetv1alpha1.ConditionValid, metav1.ConditionFalse) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonParseError, "Validate", "%s", msg)
		}
	}
	for _, typ := range []string{fleetv1alpha1.ConditionValid, fleetv1alpha1.ConditionReady} {
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: p.Generation})
	}
	return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, p)
}

// SetupWithManager registers the controller; only spec changes wake it.
func (r *TenantPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(TenantPolicyControllerName).
		For(&fleetv1alpha1.TenantPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(telemetry.TracedReconciler(TenantPolicyControllerName, r))
}
