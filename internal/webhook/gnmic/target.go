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

// TargetValidator rejects Targets whose address is not host:port or whose profile is missing, and Targets whose
// requester may not read the credentials their profile would send to the address (Trust).
type TargetValidator struct {
	Trust *Trust
}

var _ admission.Validator[*gnmicv1alpha1.Target] = TargetValidator{}

// SetupTargetWebhook registers the Target validating webhook with the manager's webhook server.
func SetupTargetWebhook(mgr ctrl.Manager, trust *Trust) error {
	return ctrl.NewWebhookManagedBy(mgr, &gnmicv1alpha1.Target{}).WithValidator(TargetValidator{Trust: trust}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v TargetValidator) ValidateCreate(ctx context.Context, t *gnmicv1alpha1.Target) (admission.Warnings, error) {
	return nil, v.check(ctx, nil, t)
}

// ValidateUpdate implements admission.Validator.
func (v TargetValidator) ValidateUpdate(ctx context.Context, old, t *gnmicv1alpha1.Target) (admission.Warnings, error) {
	return nil, v.check(ctx, old, t)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (TargetValidator) ValidateDelete(context.Context, *gnmicv1alpha1.Target) (admission.Warnings, error) {
	return nil, nil
}

func (v TargetValidator) check(ctx context.Context, old, t *gnmicv1alpha1.Target) error {
	if err := invalidTarget(t); err != nil {
		return err
	}
	if !v.Trust.on() {
		return nil
	}
	uses, err := v.Trust.targetUses(ctx, old, t)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return v.Trust.refuse(ctx, "targets", t.Name, uses)
}

func invalidTarget(t *gnmicv1alpha1.Target) error {
	if errs := gnmicv1alpha1.ValidateTarget(t); len(errs) > 0 {
		return apierrors.NewInvalid(gnmicv1alpha1.GroupVersion.WithKind("Target").GroupKind(), t.Name, errs)
	}
	return nil
}
