package gnmic

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-targetprofile,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=targetprofiles,verbs=create;update,versions=v1alpha1,name=vtargetprofile-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10

// TargetProfileValidator rejects TargetProfiles with bad durations, enums, TLS settings, proxy or labels.
type TargetProfileValidator struct{}

var _ admission.Validator[*gnmicv1alpha1.TargetProfile] = TargetProfileValidator{}

// SetupTargetProfileWebhook registers the TargetProfile validating webhook with the manager's webhook server.
func SetupTargetProfileWebhook(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &gnmicv1alpha1.TargetProfile{}).
		WithValidator(TargetProfileValidator{}).Complete()
}

// ValidateCreate implements admission.Validator.
func (TargetProfileValidator) ValidateCreate(_ context.Context, p *gnmicv1alpha1.TargetProfile) (admission.Warnings, error) {
	return gnmicv1alpha1.TargetProfileWarnings(p), invalidProfile(p)
}

// ValidateUpdate implements admission.Validator.
func (TargetProfileValidator) ValidateUpdate(_ context.Context, _, p *gnmicv1alpha1.TargetProfile) (admission.Warnings, error) {
	return gnmicv1alpha1.TargetProfileWarnings(p), invalidProfile(p)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (TargetProfileValidator) ValidateDelete(context.Context, *gnmicv1alpha1.TargetProfile) (admission.Warnings, error) {
	return nil, nil
}

func invalidProfile(p *gnmicv1alpha1.TargetProfile) error {
	if errs := gnmicv1alpha1.ValidateTargetProfile(p); len(errs) > 0 {
		return apierrors.NewInvalid(gnmicv1alpha1.GroupVersion.WithKind("TargetProfile").GroupKind(), p.Name, errs)
	}
	return nil
}
