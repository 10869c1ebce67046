package fleet

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-collector,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=collectors,verbs=create;update,versions=v1alpha1,name=vcollector-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10

// CollectorValidator rejects Collectors with a blank or changed ID and invalid remote attributes.
type CollectorValidator struct {
	// Tenancy enforces TenantPolicies; nil checks nothing.
	Tenancy *Tenancy
}

var _ admission.Validator[*fleetv1alpha1.Collector] = CollectorValidator{}

// SetupCollectorWebhook registers the Collector validating webhook.
func SetupCollectorWebhook(mgr ctrl.Manager, t *Tenancy) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.Collector{}).WithValidator(CollectorValidator{Tenancy: t}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v CollectorValidator) ValidateCreate(ctx context.Context, c *fleetv1alpha1.Collector) (admission.Warnings, error) {
	if err := invalidCollector(c, nil); err != nil {
		return nil, err
	}
	return nil, v.Tenancy.CheckCollector(ctx, c)
}

// ValidateUpdate implements admission.Validator.
func (v CollectorValidator) ValidateUpdate(ctx context.Context, old, c *fleetv1alpha1.Collector) (admission.Warnings, error) {
	if c.DeletionTimestamp != nil {
		return nil, nil
	}
	if err := invalidCollector(c, old); err != nil {
		return nil, err
	}
	return nil, v.Tenancy.CheckCollector(ctx, c)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (CollectorValidator) ValidateDelete(context.Context, *fleetv1alpha1.Collector) (admission.Warnings, error) {
	return nil, nil
}

func invalidCollector(c, old *fleetv1alpha1.Collector) error {
	if errs := fleetv1alpha1.ValidateCollector(c, old); len(errs) > 0 {
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("Collector").GroupKind(), c.Name, errs)
	}
	return nil
}
