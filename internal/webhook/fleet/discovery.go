package fleet

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-pipelinediscovery,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=pipelinediscoveries,verbs=create;update,versions=v1alpha1,name=vpipelinediscovery-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-collectordiscovery,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=collectordiscoveries,verbs=create;update,versions=v1alpha1,name=vcollectordiscovery-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// PipelineDiscoveryValidator rejects a poll interval under 1m, a target namespace that is not a DNS-1123 label
// and unknown enum values; then it applies TenantPolicies and the cross-namespace check.
type PipelineDiscoveryValidator struct {
	// Tenancy enforces TenantPolicies and the cross-namespace check; nil checks nothing.
	Tenancy *Tenancy
}

var _ admission.Validator[*fleetv1alpha1.PipelineDiscovery] = PipelineDiscoveryValidator{}

// SetupPipelineDiscoveryWebhook registers the PipelineDiscovery validating webhook.
func SetupPipelineDiscoveryWebhook(mgr ctrl.Manager, t *Tenancy) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.PipelineDiscovery{}).WithValidator(PipelineDiscoveryValidator{Tenancy: t}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v PipelineDiscoveryValidator) ValidateCreate(ctx context.Context, d *fleetv1alpha1.PipelineDiscovery) (admission.Warnings, error) {
	return nil, v.validate(ctx, d)
}

// ValidateUpdate implements admission.Validator.
func (v PipelineDiscoveryValidator) ValidateUpdate(ctx context.Context, _, d *fleetv1alpha1.PipelineDiscovery) (admission.Warnings, error) {
	if d.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, v.validate(ctx, d)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (PipelineDiscoveryValidator) ValidateDelete(context.Context, *fleetv1alpha1.PipelineDiscovery) (admission.Warnings, error) {
	return nil, nil
}

func (v PipelineDiscoveryValidator) validate(ctx context.Context, d *fleetv1alpha1.PipelineDiscovery) error {
	if errs := fleetv1alpha1.ValidatePipelineDiscovery(d); len(errs) > 0 {
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("PipelineDiscovery").GroupKind(), d.Name, errs)
	}
	if err := v.Tenancy.CheckPipelineDiscovery(ctx, d); err != nil {
		return err
	}
	return v.Tenancy.CheckTarget(ctx, "pipelinediscoveries", d.Namespace, d.Name, d.Spec.TargetNamespace, "pipelines")
}

// CollectorDiscoveryValidator rejects a poll interval under 1m, a bad target namespace, bad matchers, blank IDs
// and unknown enum values (warning about an empty selector); then it applies TenantPolicies and the
// cross-namespace check.
type CollectorDiscoveryValidator struct {
	// Tenancy enforces TenantPolicies and the cross-namespace check; nil checks nothing.
	Tenancy *Tenancy
}

var _ admission.Validator[*fleetv1alpha1.CollectorDiscovery] = CollectorDiscoveryValidator{}

// SetupCollectorDiscoveryWebhook registers the CollectorDiscovery validating webhook.
func SetupCollectorDiscoveryWebhook(mgr ctrl.Manager, t *Tenancy) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.CollectorDiscovery{}).WithValidator(CollectorDiscoveryValidator{Tenancy: t}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v CollectorDiscoveryValidator) ValidateCreate(ctx context.Context, d *fleetv1alpha1.CollectorDiscovery) (admission.Warnings, error) {
	return v.validate(ctx, d)
}

// ValidateUpdate implements admission.Validator.
func (v CollectorDiscoveryValidator) ValidateUpdate(ctx context.Context, _, d *fleetv1alpha1.CollectorDiscovery) (admission.Warnings, error) {
	if d.DeletionTimestamp != nil {
		return nil, nil
	}
	return v.validate(ctx, d)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (CollectorDiscoveryValidator) ValidateDelete(context.Context, *fleetv1alpha1.CollectorDiscovery) (admission.Warnings, error) {
	return nil, nil
}

func (v CollectorDiscoveryValidator) validate(ctx context.Context, d *fleetv1alpha1.CollectorDiscovery) (admission.Warnings, error) {
	errs, warnings := fleetv1alpha1.ValidateCollectorDiscovery(d)
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("CollectorDiscovery").GroupKind(), d.Name, errs)
	}
	if err := v.Tenancy.CheckSelector(ctx, "collectordiscoveries", d.Namespace, d.Name, field.NewPath("spec", "selector"),
		d.Spec.Selector.Matchers, d.Spec.Selector.CollectorIDs); err != nil {
		return warnings, err
	}
	return warnings, v.Tenancy.CheckTarget(ctx, "collectordiscoveries", d.Namespace, d.Name, d.Spec.TargetNamespace, "collectors")
}
