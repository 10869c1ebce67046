// Package gitops holds the admission webhooks of the katastroma.org group: Tenant validation with the
// cross-tenant namespace claim check, and the guard that keeps a namespace's tenant label immutable.
package gitops

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/tenancy"
)

// +kubebuilder:webhook:path=/validate-katastroma-org-v1alpha1-tenant,mutating=false,failurePolicy=fail,sideEffects=None,groups=katastroma.org,resources=tenants,verbs=create;update,versions=v1alpha1,name=vtenant-v1alpha1.katastroma.org,admissionReviewVersions=v1,timeoutSeconds=10

// NamespacePath serves the namespace tenant-label guard. Its configuration is not generated from a marker: it
// needs an objectSelector (config/webhook/namespace_tenant.yaml) so that only namespaces carrying the tenant
// label, before or after the change, are sent to it and ordinary namespace traffic never depends on the operator.
const NamespacePath = "/validate-v1-namespace-tenant-label"

// TenantValidator checks a Tenant's spec and refuses namespaces that belong to another tenant.
type TenantValidator struct {
	// Reader reads namespaces and Tenants uncached: a claim decided on a stale cache could hand one namespace
	// to two tenants.
	Reader client.Reader
	// Reserved are namespaces no Tenant may claim besides the system ones (the operator's own namespace).
	Reserved []string
	// AllowPrivileged lets a Tenant ask for Pod Security level privileged (--gitops-allow-privileged-tenants).
	AllowPrivileged bool
}

var _ admission.Validator[*gitopsv1alpha1.Tenant] = TenantValidator{}

// SetupTenantWebhook registers the Tenant validating webhook and the namespace label guard.
// reserved are namespaces no Tenant may claim besides the system ones (the operator's own namespace);
// allowPrivileged lets a Tenant ask for Pod Security level privileged.
func SetupTenantWebhook(mgr ctrl.Manager, allowPrivileged bool, reserved ...string) error {
	mgr.GetWebhookServer().Register(NamespacePath, &webhook.Admission{Handler: NamespaceGuard{Reader: mgr.GetAPIReader()}})
	return ctrl.NewWebhookManagedBy(mgr, &gitopsv1alpha1.Tenant{}).
		WithValidator(TenantValidator{Reader: mgr.GetAPIReader(), Reserved: reserved, AllowPrivileged: allowPrivileged}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v TenantValidator) ValidateCreate(ctx context.Context, t *gitopsv1alpha1.Tenant) (admission.Warnings, error) {
	return nil, v.validate(ctx, t)
}

// ValidateUpdate implements admission.Validator.
func (v TenantValidator) ValidateUpdate(ctx context.Context, _, t *gitopsv1alpha1.Tenant) (admission.Warnings, error) {
	if t.DeletionTimestamp != nil {
		return nil, nil // finalizer removal while offboarding
	}
	return nil, v.validate(ctx, t)
}

// ValidateDelete implements admission.Validator; deletes (offboarding) are never blocked.
func (TenantValidator) ValidateDelete(context.Context, *gitopsv1alpha1.Tenant) (admission.Warnings, error) {
	return nil, nil
}

func (v TenantValidator) validate(ctx context.Context, t *gitopsv1alpha1.Tenant) error {
	errs := tenancy.Validate(t, v.Reserved...)
	if ferr := tenancy.ValidatePodSecurity(t, v.AllowPrivileged); ferr != nil {
		errs = append(errs, ferr)
	}
	if len(errs) == 0 {
		owners, refused, err := v.owners(ctx, t)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("reading namespace owners: %w", err))
		}
		errs = tenancy.Claims(t.Name, t.Spec.Namespaces, owners)
		for i, ns := range t.Spec.Namespaces {
			if why := refused[ns]; why != "" {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "namespaces").Index(i), why))
			}
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(gitopsv1alpha1.GroupVersion.WithKind("Tenant").GroupKind(), t.Name, errs)
	}
	return nil
}

// owners maps each namespace of t to the tenant already holding it: the namespace's label, else another Tenant
// listing it; refused maps an existing namespace no tenant may hold to why (tenancy.Refusal).
func (v TenantValidator) owners(ctx context.Context, t *gitopsv1alpha1.Tenant) (owners, refused map[string]string, err error) {
	owners, refused = map[string]string{}, map[string]string{}
	tenants := &gitopsv1alpha1.TenantList{}
	if err := v.Reader.List(ctx, tenants); err != nil {
		return nil, nil, err
	}
	for _, other := range tenants.Items {
		if other.Name == t.Name {
			continue
		}
		for _, ns := range other.Spec.Namespaces {
			owners[ns] = other.Name
		}
	}
	for _, name := range t.Spec.Namespaces {
		ns := &corev1.Namespace{}
		err := v.Reader.Get(ctx, types.NamespacedName{Name: name}, ns)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, nil, err
		default:
			if l := ns.Labels[gitopsv1alpha1.LabelTenant]; l != "" {
				owners[name] = l
			}
			facts, err := tenancy.Facts(ctx, v.Reader, ns)
			if err != nil {
				return nil, nil, err
			}
			refused[name] = tenancy.Refusal(facts, v.Reserved)
		}
	}
	return owners, refused, nil
}

// NamespaceGuard keeps a namespace's katastroma.org/tenant label immutable once set.
// Removing it is allowed once the Tenant named by it no longer lists the namespace (or is gone or being deleted):
// that is how the Tenant controller releases a namespace it adopted.
type NamespaceGuard struct {
	// Reader reads Tenants uncached; nil never allows a removal.
	Reader client.Reader
}

var _ admission.Handler = NamespaceGuard{}

// Handle implements admission.Handler.
func (g NamespaceGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != "UPDATE" {
		return admission.Allowed("")
	}
	var oldNS, newNS corev1.Namespace
	if err := decode(req.OldObject.Raw, &oldNS); err != nil {
		return admission.Errored(400, err)
	}
	if err := decode(req.Object.Raw, &newNS); err != nil {
		return admission.Errored(400, err)
	}
	if ferr := tenancy.LabelChange(oldNS.Labels, newNS.Labels); ferr != nil {
		if _, has := newNS.Labels[gitopsv1alpha1.LabelTenant]; !has && g.Reader != nil {
			released, err := g.released(ctx, oldNS.Labels[gitopsv1alpha1.LabelTenant], oldNS.Name)
			if err != nil {
				return admission.Errored(500, err)
			}
			if released {
				return admission.Allowed("released by its tenant")
			}
		}
		return admission.Denied(field.ErrorList{ferr}.ToAggregate().Error())
	}
	return admission.Allowed("")
}

// released reports whether tenant no longer holds ns: the Tenant is gone, being deleted, or does not list ns.
func (g NamespaceGuard) released(ctx context.Context, tenant, ns string) (bool, error) {
	t := &gitopsv1alpha1.Tenant{}
	if err := g.Reader.Get(ctx, client.ObjectKey{Name: tenant}, t); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	return t.DeletionTimestamp != nil || !slices.Contains(t.Spec.Namespaces, ns), nil
}
