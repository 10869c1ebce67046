package fleet

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/claims"
	"github.com/quartet-dev/quartet-operator/internal/kube"
)

// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-collector,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=collectors,verbs=create;update,versions=v1alpha1,name=vcollector-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10

// CollectorValidator rejects Collectors with a blank or changed ID, invalid remote attributes, or an ID another
// Collector already claims.
type CollectorValidator struct {
	// Tenancy enforces TenantPolicies; nil checks nothing.
	Tenancy *Tenancy
	// Claims reads Collectors through the claims.IDField index (the manager's cache); nil skips the check.
	Claims client.Reader
}

var _ admission.Validator[*fleetv1alpha1.Collector] = CollectorValidator{}

// SetupCollectorWebhook registers the Collector validating webhook.
func SetupCollectorWebhook(mgr ctrl.Manager, t *Tenancy) error {
	if err := kube.IndexField(context.Background(), mgr, &fleetv1alpha1.Collector{}, claims.IDField, claims.IndexID); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.Collector{}).
		WithValidator(CollectorValidator{Tenancy: t, Claims: mgr.GetClient()}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v CollectorValidator) ValidateCreate(ctx context.Context, c *fleetv1alpha1.Collector) (admission.Warnings, error) {
	if err := invalidCollector(c, nil); err != nil {
		return nil, err
	}
	if err := v.claimed(ctx, c); err != nil {
		return nil, err
	}
	return nil, v.Tenancy.CheckCollector(ctx, c)
}

// claimed refuses a second claim on a collector ID, naming the Collector that holds it: two Collectors pushing
// their own attribute diffs to one collector would undo each other on every reconcile.
func (v CollectorValidator) claimed(ctx context.Context, c *fleetv1alpha1.Collector) error {
	if v.Claims == nil {
		return nil
	}
	list := &fleetv1alpha1.CollectorList{}
	if err := v.Claims.List(ctx, list, client.MatchingFields{claims.IDField: c.Spec.ID}); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("checking who claims collector ID %q: %w", c.Spec.ID, err))
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.Namespace == c.Namespace && other.Name == c.Name {
			continue
		}
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("Collector").GroupKind(), c.Name, field.ErrorList{
			field.Duplicate(field.NewPath("spec", "id"), fmt.Sprintf("%s (already claimed by Collector %s)", c.Spec.ID, claims.Key(other)))})
	}
	return nil
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
