package v1alpha1

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateSelector checks a PolicySelector: matcher syntax, ID list size, no blank IDs, and (when required)
// that it names at least one matcher or ID.
func ValidateSelector(path *field.Path, s PolicySelector, required bool) field.ErrorList {
	errs := ValidateMatchers(path.Child("matchers"), s.Matchers)
	if len(s.CollectorIDs) > MaxSelectorCollectorIDs {
		errs = append(errs, field.TooMany(path.Child("collectorIDs"), len(s.CollectorIDs), MaxSelectorCollectorIDs))
	}
	for i, id := range s.CollectorIDs {
		if strings.TrimSpace(id) == "" {
			errs = append(errs, field.Required(path.Child("collectorIDs").Index(i), "a collector ID"))
		}
	}
	if required && s.IsEmpty() {
		errs = append(errs, field.Required(path, "at least one matcher or collector ID (an empty selector matches nothing)"))
	}
	return errs
}

// ValidateRemoteAttributePolicy returns every problem with a RemoteAttributePolicy.
func ValidateRemoteAttributePolicy(p *RemoteAttributePolicy) field.ErrorList {
	spec := field.NewPath("spec")
	errs := ValidateSelector(spec.Child("selector"), p.Spec.Selector, true)
	if len(p.Spec.Attributes) == 0 {
		errs = append(errs, field.Required(spec.Child("attributes"), "at least one attribute"))
	}
	return append(errs, ValidateAttributes(spec.Child("attributes"), p.Spec.Attributes)...)
}

// ValidateExternalAttributeSync returns the structural problems of an ExternalAttributeSync: kind/source
// mismatch, a Secret in another namespace, the HTTP method, the SQL driver and the mapping. The schedule, the
// URL's host and the SQL text are checked by the webhook, which owns those parsers.
func ValidateExternalAttributeSync(s *ExternalAttributeSync) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	src := spec.Child("source")
	switch s.Spec.Source.Kind {
	case SourceKindHTTP:
		if s.Spec.Source.HTTP == nil {
			errs = append(errs, field.Required(src.Child("http"), "required for kind HTTP"))
		} else if m := s.Spec.Source.HTTP.Method; m != "" && m != "GET" && m != "POST" {
			errs = append(errs, field.NotSupported(src.Child("http", "method"), m, []string{"GET", "POST"}))
		}
		if s.Spec.Source.SQL != nil {
			errs = append(errs, field.Forbidden(src.Child("sql"), "must be empty for kind HTTP"))
		}
	case SourceKindSQL:
		if s.Spec.Source.SQL == nil {
			errs = append(errs, field.Required(src.Child("sql"), "required for kind SQL"))
		} else if d := s.Spec.Source.SQL.Driver; d != SQLDriverPostgres && d != SQLDriverMySQL {
			errs = append(errs, field.NotSupported(src.Child("sql", "driver"), d, []SQLDriver{SQLDriverPostgres, SQLDriverMySQL}))
		}
		if s.Spec.Source.HTTP != nil {
			errs = append(errs, field.Forbidden(src.Child("http"), "must be empty for kind SQL"))
		}
		if s.Spec.Source.SecretRef == nil {
			errs = append(errs, field.Required(src.Child("secretRef"), "a Secret with the dsn key"))
		}
	default:
		errs = append(errs, field.NotSupported(src.Child("kind"), s.Spec.Source.Kind, []ExternalSourceKind{SourceKindHTTP, SourceKindSQL}))
	}
	if ref := s.Spec.Source.SecretRef; ref != nil && ref.Namespace != "" && ref.Namespace != s.Namespace {
		errs = append(errs, field.Forbidden(src.Child("secretRef", "namespace"),
			fmt.Sprintf("must be empty or %q: a sync reads Secrets of its own namespace only", s.Namespace)))
	}
	errs = append(errs, ValidateSelector(spec.Child("selector"), s.Spec.Selector, true)...)
	m := spec.Child("mapping")
	if strings.TrimSpace(s.Spec.Mapping.CollectorIDField) == "" {
		errs = append(errs, field.Required(m.Child("collectorIDField"), "the record field holding the collector ID"))
	}
	if n := len(s.Spec.Mapping.AttributeFields); n == 0 || n > MaxRemoteAttributes {
		errs = append(errs, field.Invalid(m.Child("attributeFields"), n, "must map 1 to 100 attributes"))
	}
	for k, f := range s.Spec.Mapping.AttributeFields {
		if reason := ValidateAttributeKey(k); reason != "" {
			errs = append(errs, field.Invalid(m.Child("attributeFields").Key(k), k, reason))
		}
		if strings.TrimSpace(f) == "" {
			errs = append(errs, field.Required(m.Child("attributeFields").Key(k), "the record field holding the value"))
		}
	}
	for i, k := range s.Spec.Mapping.RequiredKeys {
		if _, ok := s.Spec.Mapping.AttributeFields[k]; !ok {
			errs = append(errs, field.Invalid(m.Child("requiredKeys").Index(i), k, "must be a key of attributeFields"))
		}
	}
	return errs
}
