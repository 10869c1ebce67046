package v1alpha1

import (
	"fmt"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// otelTopLevelKeys are the top-level sections of an OpenTelemetry Collector configuration; Alloy contents that
// start with one were almost certainly meant as configType OpenTelemetryCollector.
var otelTopLevelKeys = []string{"receivers:", "processors:", "exporters:", "service:"}

// CheckContents returns why contents do not fit the config type, or "" when they do. Alloy contents must not
// look like an OpenTelemetry Collector YAML file; OpenTelemetry Collector contents must be a YAML mapping with a
// service key.
func CheckContents(configType ConfigType, contents string) string {
	if strings.TrimSpace(contents) == "" {
		return "must not be empty"
	}
	switch configType {
	case ConfigTypeOTel:
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(contents), &doc); err != nil {
			return "OpenTelemetryCollector contents must be YAML: " + err.Error()
		}
		if _, ok := doc["service"]; !ok {
			return "OpenTelemetryCollector contents must have a top-level service key"
		}
	default:
		first := firstSignificantLine(contents)
		for _, k := range otelTopLevelKeys {
			if strings.HasPrefix(first, k) {
				return fmt.Sprintf("Alloy contents start with %q, which is OpenTelemetry Collector YAML: set configType to OpenTelemetryCollector", k)
			}
		}
	}
	return ""
}

func firstSignificantLine(s string) string {
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "//") {
			continue
		}
		return line
	}
	return ""
}

// ValidateMatchers checks a matcher list's size and each matcher's syntax.
func ValidateMatchers(path *field.Path, matchers []string) field.ErrorList {
	var errs field.ErrorList
	if len(matchers) > MaxMatchers {
		errs = append(errs, field.TooMany(path, len(matchers), MaxMatchers))
	}
	for i, m := range matchers {
		switch {
		case len(m) == 0:
			errs = append(errs, field.Required(path.Index(i), "a matcher such as env=\"prod\""))
		case len(m) > MaxMatcherLength:
			errs = append(errs, field.TooLong(path.Index(i), "", MaxMatcherLength))
		default:
			if _, err := ParseMatcher(m); err != nil {
				errs = append(errs, field.Invalid(path.Index(i), m, err.Error()))
			}
		}
	}
	return errs
}

// ValidatePipelineName returns why a Fleet pipeline name is unusable, or "".
func ValidatePipelineName(name string) string {
	if len(name) > 253 {
		return "must be at most 253 characters"
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return "must not contain whitespace or control characters"
		}
	}
	return ""
}

// ValidatePipeline returns every problem with a Pipeline, each naming its field, and warnings.
func ValidatePipeline(p *Pipeline) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	spec := field.NewPath("spec")
	if p.Spec.Name != "" {
		if reason := ValidatePipelineName(p.Spec.Name); reason != "" {
			errs = append(errs, field.Invalid(spec.Child("name"), p.Spec.Name, reason))
		}
	} else if reason := ValidatePipelineName(p.Name); reason != "" {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), p.Name, reason))
	}
	configType := p.Spec.ConfigType
	if configType == "" {
		configType = ConfigTypeAlloy
	}
	if configType != ConfigTypeAlloy && configType != ConfigTypeOTel {
		errs = append(errs, field.NotSupported(spec.Child("configType"), configType, []ConfigType{ConfigTypeAlloy, ConfigTypeOTel}))
	} else if p.Spec.Contents == "" {
		errs = append(errs, field.Required(spec.Child("contents"), "the pipeline configuration"))
	} else if reason := CheckContents(configType, p.Spec.Contents); reason != "" {
		errs = append(errs, field.Invalid(spec.Child("contents"), "<contents>", reason))
	}
	errs = append(errs, ValidateMatchers(spec.Child("matchers"), p.Spec.Matchers)...)
	if s := p.Spec.Source; s != nil {
		path := spec.Child("source")
		switch s.Type {
		case "", SourceTypeUnspecified:
			if s.Namespace != "" {
				errs = append(errs, field.Invalid(path.Child("namespace"), s.Namespace, "must be empty when source.type is Unspecified"))
			}
		case SourceTypeKubernetes:
			warnings = append(warnings, "spec.source.type Kubernetes is deprecated and never sent to Fleet Management")
		case SourceTypeGit, SourceTypeTerraform, SourceTypeGrafana:
			if s.Namespace == "" {
				errs = append(errs, field.Required(path.Child("namespace"), fmt.Sprintf("required when source.type is %s", s.Type)))
			}
			if s.Type == SourceTypeGrafana && p.Annotations[AnnotationImportMode] == ImportModeAdopt {
				errs = append(errs, field.Invalid(path.Child("type"), s.Type,
					"Grafana-sourced pipelines cannot be adopted (annotation "+AnnotationImportMode+"=adopt); use read-only"))
			}
		default:
			errs = append(errs, field.NotSupported(path.Child("type"), s.Type,
				[]SourceType{SourceTypeGit, SourceTypeTerraform, SourceTypeGrafana, SourceTypeKubernetes, SourceTypeUnspecified}))
		}
	}
	meta := field.NewPath("metadata", "annotations")
	if v, ok := p.Annotations[AnnotationImportMode]; ok && v != ImportModeReadOnly && v != ImportModeAdopt {
		errs = append(errs, field.NotSupported(meta.Key(AnnotationImportMode), v, []string{ImportModeReadOnly, ImportModeAdopt}))
	}
	if v, ok := p.Annotations[AnnotationNameScope]; ok && v != NameScopeNone && v != NameScopeNamespace {
		errs = append(errs, field.NotSupported(meta.Key(AnnotationNameScope), v, []string{NameScopeNone, NameScopeNamespace}))
	}
	return errs, warnings
}

// ValidateAttributeKey returns why a remote attribute key is unusable, or "".
func ValidateAttributeKey(key string) string {
	switch {
	case key == "":
		return "attribute keys must not be empty"
	case strings.HasPrefix(key, ReservedAttributePrefix):
		return "attribute keys must not start with \"collector.\" (reserved by Fleet Management)"
	}
	return ""
}

// ValidateAttributes checks a remote attribute map: at most 100 entries, valid keys, values ≤ 1024 characters.
func ValidateAttributes(path *field.Path, attrs map[string]string) field.ErrorList {
	var errs field.ErrorList
	if len(attrs) > MaxRemoteAttributes {
		errs = append(errs, field.TooMany(path, len(attrs), MaxRemoteAttributes))
	}
	for k, v := range attrs {
		if reason := ValidateAttributeKey(k); reason != "" {
			errs = append(errs, field.Invalid(path.Key(k), k, reason))
		}
		if len(v) > MaxAttributeValueLength {
			errs = append(errs, field.TooLong(path.Key(k), "", MaxAttributeValueLength))
		}
	}
	return errs
}

// ValidateCollector returns every problem with a Collector; old is the stored object on update, else nil.
func ValidateCollector(c, old *Collector) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if strings.TrimSpace(c.Spec.ID) == "" {
		errs = append(errs, field.Required(spec.Child("id"), "the collector's Fleet Management ID"))
	}
	if old != nil && old.Spec.ID != c.Spec.ID {
		errs = append(errs, field.Invalid(spec.Child("id"), c.Spec.ID, fmt.Sprintf("is immutable (was %q)", old.Spec.ID)))
	}
	errs = append(errs, ValidateAttributes(spec.Child("remoteAttributes"), c.Spec.RemoteAttributes)...)
	return errs
}
