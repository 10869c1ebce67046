// Package fleet holds the admission webhooks of the fleetmanagement.grafana.com group.
package fleet

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-pipeline,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=pipelines,verbs=create;update,versions=v1alpha1,name=vpipeline-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10

// PipelineValidator rejects Pipelines whose contents do not fit their config type, whose matchers do not parse,
// or whose source and annotations contradict each other.
type PipelineValidator struct {
	// Tenancy enforces TenantPolicies; nil checks nothing.
	Tenancy *Tenancy
}

var _ admission.Validator[*fleetv1alpha1.Pipeline] = PipelineValidator{}

// SetupPipelineWebhook registers the Pipeline validating webhook.
func SetupPipelineWebhook(mgr ctrl.Manager, t *Tenancy) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.Pipeline{}).WithValidator(PipelineValidator{Tenancy: t}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v PipelineValidator) ValidateCreate(ctx context.Context, p *fleetv1alpha1.Pipeline) (admission.Warnings, error) {
	return v.validate(ctx, p)
}

// ValidateUpdate implements admission.Validator. A Pipeline being deleted is not re-validated, so its finalizer
// can always be removed.
func (v PipelineValidator) ValidateUpdate(ctx context.Context, _, p *fleetv1alpha1.Pipeline) (admission.Warnings, error) {
	if p.DeletionTimestamp != nil {
		return nil, nil
	}
	return v.validate(ctx, p)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (PipelineValidator) ValidateDelete(context.Context, *fleetv1alpha1.Pipeline) (admission.Warnings, error) {
	return nil, nil
}

// validate checks the spec, then (only for a valid spec) the requesting user's TenantPolicies.
func (v PipelineValidator) validate(ctx context.Context, p *fleetv1alpha1.Pipeline) (admission.Warnings, error) {
	errs, warnings := fleetv1alpha1.ValidatePipeline(p)
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("Pipeline").GroupKind(), p.Name, errs)
	}
	if err := v.Tenancy.CheckSelector(ctx, "pipelines", p.Namespace, p.Name, field.NewPath("spec"), p.Spec.Matchers, nil); err != nil {
		return warnings, err
	}
	return warnings, v.Tenancy.CheckAdoption(ctx, p)
}
