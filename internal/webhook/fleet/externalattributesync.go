package fleet

import (
	"context"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/extsync"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// +kubebuilder:webhook:path=/validate-fleetmanagement-grafana-com-v1alpha1-externalattributesync,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetmanagement.grafana.com,resources=externalattributesyncs,verbs=create;update,versions=v1alpha1,name=vexternalattributesync-v1alpha1.fleetmanagement.grafana.com,admissionReviewVersions=v1,timeoutSeconds=10

// ExternalAttributeSyncValidator rejects syncs with a bad schedule, a source that does not fit its kind, a Secret
// in another namespace, a URL that is not http(s), plain http with credentials, a host the SSRF guard refuses,
// SQL that is not a single read-only SELECT, or an empty selector.
type ExternalAttributeSyncValidator struct {
	// Guard checks URL hosts; nil is the default guard.
	Guard *netguard.Guard
	// Tenancy enforces TenantPolicies; nil checks nothing.
	Tenancy *Tenancy
}

var _ admission.Validator[*fleetv1alpha1.ExternalAttributeSync] = ExternalAttributeSyncValidator{}

// SetupExternalAttributeSyncWebhook registers the ExternalAttributeSync validating webhook with the guard.
func SetupExternalAttributeSyncWebhook(mgr ctrl.Manager, guard *netguard.Guard, t *Tenancy) error {
	return ctrl.NewWebhookManagedBy(mgr, &fleetv1alpha1.ExternalAttributeSync{}).
		WithValidator(ExternalAttributeSyncValidator{Guard: guard, Tenancy: t}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v ExternalAttributeSyncValidator) ValidateCreate(ctx context.Context, s *fleetv1alpha1.ExternalAttributeSync) (admission.Warnings, error) {
	return nil, v.invalid(ctx, s)
}

// ValidateUpdate implements admission.Validator.
func (v ExternalAttributeSyncValidator) ValidateUpdate(ctx context.Context, _, s *fleetv1alpha1.ExternalAttributeSync) (admission.Warnings, error) {
	if s.DeletionTimestamp != nil {
		return nil, nil
	}
	return nil, v.invalid(ctx, s)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (ExternalAttributeSyncValidator) ValidateDelete(context.Context, *fleetv1alpha1.ExternalAttributeSync) (admission.Warnings, error) {
	return nil, nil
}

func (v ExternalAttributeSyncValidator) invalid(ctx context.Context, s *fleetv1alpha1.ExternalAttributeSync) error {
	if errs := ValidateExternalAttributeSync(s, v.Guard); len(errs) > 0 {
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("ExternalAttributeSync").GroupKind(), s.Name, errs)
	}
	if ref := s.Spec.Source.SecretRef; ref != nil {
		if err := v.Tenancy.CheckSecretUse(ctx, "externalattributesyncs", s.Namespace, s.Name, field.NewPath("spec", "source", "secretRef"), ref.Name); err != nil {
			return err
		}
	}
	if err := v.Tenancy.CheckSelector(ctx, "externalattributesyncs", s.Namespace, s.Name, field.NewPath("spec", "selector"),
		s.Spec.Selector.Matchers, s.Spec.Selector.CollectorIDs); err != nil {
		return err
	}
	return v.Tenancy.CheckAttributes(ctx, "externalattributesyncs", s.Namespace, s.Name, field.NewPath("spec", "mapping", "attributeFields"),
		nil, slices.Collect(maps.Keys(s.Spec.Mapping.AttributeFields)))
}

// ValidateExternalAttributeSync is the whole admission check (structure, schedule, URL, SQL).
func ValidateExternalAttributeSync(s *fleetv1alpha1.ExternalAttributeSync, guard *netguard.Guard) field.ErrorList {
	if guard == nil {
		guard = netguard.New()
	}
	errs := fleetv1alpha1.ValidateExternalAttributeSync(s)
	spec := field.NewPath("spec")
	if _, err := extsync.ParseSchedule(s.Spec.Schedule); err != nil {
		errs = append(errs, field.Invalid(spec.Child("schedule"), s.Spec.Schedule, err.Error()))
	}
	src := spec.Child("source")
	if h := s.Spec.Source.HTTP; h != nil && s.Spec.Source.Kind == fleetv1alpha1.SourceKindHTTP {
		// The URL may carry a token in its query: never echo it back.
		redacted := extsync.Redact(h.URL)
		if u, err := guard.CheckURL(h.URL); err != nil {
			errs = append(errs, field.Invalid(src.Child("http", "url"), redacted, err.Error()))
		} else if s.Spec.Source.SecretRef != nil && !strings.EqualFold(u.Scheme, "https") {
			errs = append(errs, field.Invalid(src.Child("http", "url"), redacted, "must be https when secretRef supplies credentials"))
		}
	}
	if q := s.Spec.Source.SQL; q != nil && s.Spec.Source.Kind == fleetv1alpha1.SourceKindSQL {
		if err := extsync.CheckSelectQuery(q.Driver, q.Query); err != nil {
			errs = append(errs, field.Invalid(src.Child("sql", "query"), "<query>", err.Error()))
		}
	}
	return errs
}
