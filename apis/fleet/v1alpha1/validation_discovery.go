package v1alpha1

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePollInterval checks that a set interval is at least MinPollInterval (unset means the default).
func validatePollInterval(path *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && d.Duration < MinPollInterval {
		return field.ErrorList{field.Invalid(path, d.Duration.String(), fmt.Sprintf("must be at least %s", MinPollInterval))}
	}
	return nil
}

func validateTargetNamespace(path *field.Path, ns string) field.ErrorList {
	if ns == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(ns) {
		errs = append(errs, field.Invalid(path, ns, msg))
	}
	return errs
}

func validateRemoval(path *field.Path, p RemovalPolicy) field.ErrorList {
	if p != "" && p != RemovalKeep && p != RemovalDelete {
		return field.ErrorList{field.NotSupported(path, p, []RemovalPolicy{RemovalKeep, RemovalDelete})}
	}
	return nil
}

// ValidatePipelineDiscovery returns every problem with a PipelineDiscovery, each naming its field.
func ValidatePipelineDiscovery(d *PipelineDiscovery) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validatePollInterval(spec.Child("pollInterval"), d.Spec.PollInterval)
	errs = append(errs, validateTargetNamespace(spec.Child("targetNamespace"), d.Spec.TargetNamespace)...)
	if ct := d.Spec.Selector.ConfigType; ct != nil && *ct != ConfigTypeAlloy && *ct != ConfigTypeOTel {
		errs = append(errs, field.NotSupported(spec.Child("selector", "configType"), *ct, []ConfigType{ConfigTypeAlloy, ConfigTypeOTel}))
	}
	if m := d.Spec.ImportMode; m != "" && m != DiscoveryAdopt && m != DiscoveryReadOnly {
		errs = append(errs, field.NotSupported(spec.Child("importMode"), m, []DiscoveryImportMode{DiscoveryAdopt, DiscoveryReadOnly}))
	}
	return append(errs, validateRemoval(spec.Child("policy", "onPipelineRemoved"), d.Spec.Policy.OnPipelineRemoved)...)
}

// ValidateCollectorDiscovery returns every problem with a CollectorDiscovery and a warning for an empty
// selector (which discovers every collector of the stack).
func ValidateCollectorDiscovery(d *CollectorDiscovery) (field.ErrorList, []string) {
	spec := field.NewPath("spec")
	errs := validatePollInterval(spec.Child("pollInterval"), d.Spec.PollInterval)
	errs = append(errs, validateTargetNamespace(spec.Child("targetNamespace"), d.Spec.TargetNamespace)...)
	errs = append(errs, ValidateSelector(spec.Child("selector"), d.Spec.Selector, false)...)
	errs = append(errs, validateRemoval(spec.Child("policy", "onCollectorRemoved"), d.Spec.Policy.OnCollectorRemoved)...)
	if c := d.Spec.Policy.OnConflict; c != "" && c != ConflictSkip {
		errs = append(errs, field.NotSupported(spec.Child("policy", "onConflict"), c, []ConflictPolicy{ConflictSkip}))
	}
	var warnings []string
	if d.Spec.Selector.IsEmpty() {
		warnings = append(warnings, "spec.selector is empty: every collector of the Fleet stack is discovered")
	}
	return errs, warnings
}

// ValidateTenantPolicy returns every problem with a TenantPolicy.
func ValidateTenantPolicy(p *TenantPolicy) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if len(p.Spec.Subjects) == 0 {
		errs = append(errs, field.Required(spec.Child("subjects"), "at least one User, Group or ServiceAccount"))
	}
	for i, s := range p.Spec.Subjects {
		path := spec.Child("subjects").Index(i)
		if strings.TrimSpace(s.Name) == "" {
			errs = append(errs, field.Required(path.Child("name"), "the subject's name"))
		}
		switch s.Kind {
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.Namespace != "" {
				errs = append(errs, field.Invalid(path.Child("namespace"), s.Namespace, "must be empty for "+s.Kind))
			}
			if s.APIGroup != "" && s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(path.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		case rbacv1.ServiceAccountKind:
			if s.Namespace == "" {
				errs = append(errs, field.Required(path.Child("namespace"), "the ServiceAccount's namespace"))
			}
			if s.APIGroup != "" {
				errs = append(errs, field.Invalid(path.Child("apiGroup"), s.APIGroup, "must be empty for ServiceAccount"))
			}
		default:
			errs = append(errs, field.NotSupported(path.Child("kind"), s.Kind,
				[]string{rbacv1.UserKind, rbacv1.GroupKind, rbacv1.ServiceAccountKind}))
		}
	}
	if len(p.Spec.RequiredMatchers) == 0 {
		errs = append(errs, field.Required(spec.Child("requiredMatchers"), "at least one matcher such as team=\"a\""))
	}
	errs = append(errs, ValidateMatchers(spec.Child("requiredMatchers"), p.Spec.RequiredMatchers)...)
	if sel := p.Spec.NamespaceSelector; sel != nil {
		if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(spec.Child("namespaceSelector"), sel.String(), err.Error()))
		}
	}
	return errs
}
