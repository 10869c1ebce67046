// Package gnmic holds the admission webhooks of the operator.gnmic.dev group.
package gnmic

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-target,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=targets,verbs=create;update,versions=v1alpha1,name=vtarget-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10

// TargetValidator rejects Targets whose address is not host:port or whose profile is missing.
type TargetValidator struct{}

var _ admission.Validator[*gnmicv1alpha1.Target] = TargetValidator{}

// SetupTargetWebhook registers the Target validating webhook with the manager's webhook server.
func SetupTargetWebhook(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &gnmicv1alpha1.Target{}).WithValidator(TargetValidator{}).Complete()
}

// ValidateCreate implements admission.Validator.
func (TargetValidator) ValidateCreate(_ context.Context, t *gnmicv1alpha1.Target) (admission.Warnings, error) {
	return nil, invalidTarget(t)
}

// ValidateUpdate implements admission.Validator.
func (TargetValidator) ValidateUpdate(_ context.Context, _, t *gnmicv1alpha1.Target) (admission.Warnings, error) {
	return nil, invalidTarget(t)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (TargetValidator) ValidateDelete(context.Context, *gnmicv1alpha1.Target) (admission.Warnings, error) {
	return nil, nil
}

func invalidTarget(t *gnmicv1alpha1.Target) error {
	if errs := gnmicv1alpha1.ValidateTarget(t); len(errs) > 0 {
		return apierrors.NewInvalid(gnmicv1alpha1.GroupVersion.WithKind("Target").GroupKind(), t.Name, errs)
	}
	return nil
}
