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
// Its Secrets and ConfigMaps (credentials, client certificate, CA bundle) must be readable by the requester (Trust).
type TargetProfileValidator struct {
	Trust *Trust
}

var _ admission.Validator[*gnmicv1alpha1.TargetProfile] = TargetProfileValidator{}

// SetupTargetProfileWebhook registers the TargetProfile validating webhook with the manager's webhook server.
func SetupTargetProfileWebhook(mgr ctrl.Manager, trust *Trust) error {
	return ctrl.NewWebhookManagedBy(mgr, &gnmicv1alpha1.TargetProfile{}).
		WithValidator(TargetProfileValidator{Trust: trust}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v TargetProfileValidator) ValidateCreate(ctx context.Context, p *gnmicv1alpha1.TargetProfile) (admission.Warnings, error) {
	return gnmicv1alpha1.TargetProfileWarnings(p), v.check(ctx, p)
}

// ValidateUpdate implements admission.Validator. Every update is checked, not only changed references: an
// unchanged credentialsRef on a profile someone else created still goes to the Targets the new author adds.
func (v TargetProfileValidator) ValidateUpdate(ctx context.Context, _, p *gnmicv1alpha1.TargetProfile) (admission.Warnings, error) {
	return gnmicv1alpha1.TargetProfileWarnings(p), v.check(ctx, p)
}

func (v TargetProfileValidator) check(ctx context.Context, p *gnmicv1alpha1.TargetProfile) error {
	if err := invalidProfile(p); err != nil {
		return err
	}
	return v.Trust.refuse(ctx, "targetprofiles", p.Name, targetProfileUses(p))
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
