package fleet

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-remoteattributepolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=remoteattributepolicies,verbs=create;update,versions=v1alpha1,name=vremoteattributepolicy-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10

// RemoteAttributePolicyValidator rejects policies without attributes or selector, with bad matchers, blank IDs
// or invalid attributes.
type RemoteAttributePolicyValidator struct {
	// Tenancy enforces TenantPolicies; nil checks nothing.
	Tenancy *Tenancy
}

var _ admission.Validator[*fleetv1alpha1.RemoteAttributePolicy] = RemoteAttributePolicyValidator{}

// SetupRemoteAttributePolicyWebhook registers the RemoteAttributePolicy validating webhook.
func SetupRemoteAttributePolicyWebhook(mgr ctrl.Manager, t *Tenancy) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.RemoteAttributePolicy{}).WithValidator(RemoteAttributePolicyValidator{Tenancy: t}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v RemoteAttributePolicyValidator) ValidateCreate(ctx context.Context, p *fleetv1alpha1.RemoteAttributePolicy) (admission.Warnings, error) {
	return nil, v.validate(ctx, p)
}

// ValidateUpdate implements admission.Validator.
func (v RemoteAttributePolicyValidator) ValidateUpdate(ctx context.Context, _, p *fleetv1alpha1.RemoteAttributePolicy) (admission.Warnings, error) {
	if p.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, v.validate(ctx, p)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (RemoteAttributePolicyValidator) ValidateDelete(context.Context, *fleetv1alpha1.RemoteAttributePolicy) (admission.Warnings, error) {
	return nil, nil
}

func (v RemoteAttributePolicyValidator) validate(ctx context.Context, p *fleetv1alpha1.RemoteAttributePolicy) error {
	if errs := fleetv1alpha1.ValidateRemoteAttributePolicy(p); len(errs) > 0 {
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("RemoteAttributePolicy").GroupKind(), p.Name, errs)
	}
	if err := v.Tenancy.CheckSelector(ctx, "remoteattributepolicies", p.Namespace, p.Name, field.NewPath("spec", "selector"),
		p.Spec.Selector.Matchers, p.Spec.Selector.CollectorIDs); err != nil {
		return err
	}
	return v.Tenancy.CheckAttributes(ctx, "remoteattributepolicies", p.Namespace, p.Name, field.NewPath("spec", "attributes"),
		p.Spec.Attributes, nil)
}
