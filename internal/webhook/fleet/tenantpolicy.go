package fleet

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-tenantpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=tenantpolicies,verbs=create;update,versions=v1alpha1,name=vtenantpolicy-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10

// TenantPolicyValidator rejects policies without subjects, with malformed subjects, bad required matchers or an
// invalid namespaceSelector.
type TenantPolicyValidator struct{}

var _ admission.Validator[*fleetv1alpha1.TenantPolicy] = TenantPolicyValidator{}

// SetupTenantPolicyWebhook registers the TenantPolicy validating webhook.
func SetupTenantPolicyWebhook(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.TenantPolicy{}).WithValidator(TenantPolicyValidator{}).Complete()
}

// ValidateCreate implements admission.Validator.
func (TenantPolicyValidator) ValidateCreate(_ context.Context, p *fleetv1alpha1.TenantPolicy) (admission.Warnings, error) {
	return nil, invalidTenantPolicy(p)
}

// ValidateUpdate implements admission.Validator.
func (TenantPolicyValidator) ValidateUpdate(_ context.Context, _, p *fleetv1alpha1.TenantPolicy) (admission.Warnings, error) {
	if p.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, invalidTenantPolicy(p)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (TenantPolicyValidator) ValidateDelete(context.Context, *fleetv1alpha1.TenantPolicy) (admission.Warnings, error) {
	return nil, nil
}

func invalidTenantPolicy(p *fleetv1alpha1.TenantPolicy) error {
	if errs := fleetv1alpha1.ValidateTenantPolicy(p); len(errs) > 0 {
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("TenantPolicy").GroupKind(), p.Name, errs)
	}
	return nil
}
