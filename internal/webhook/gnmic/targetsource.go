package gnmic

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// +kubebuilder:webhook:path=/validate-operator-gnmic-dev-v1alpha1-targetsource,mutating=false,failurePolicy=fail,sideEffects=None,groups=operator.gnmic.dev,resources=targetsources,verbs=create;update,versions=v1alpha1,name=vtargetsource-v1alpha1.operator.gnmic.dev,admissionReviewVersions=v1,timeoutSeconds=10

// TargetSourceValidator compiles every CEL mapping expression, checks the cross-field rules, and warns (without
// rejecting) about referenced Secrets, ConfigMaps and TargetProfiles that do not exist yet.
type TargetSourceValidator struct {
	Mapper *targetsource.Mapper
	// Reader looks up referenced objects for warnings; nil skips the warnings.
	Reader client.Reader
	// Trust checks that the requester may read every Secret and ConfigMap the source names and the credentials
	// of the profiles it names; nil checks nothing.
	Trust *Trust
	// Guard refuses inventory URLs on special-purpose addresses and in-cluster names (the fetch checks every
	// dialled address again); nil blocks every special-purpose range.
	Guard *netguard.Guard
}

var _ admission.Validator[*gnmicv1alpha1.TargetSource] = TargetSourceValidator{}

// SetupTargetSourceWebhook registers the TargetSource validating webhook with the manager's webhook server.
func SetupTargetSourceWebhook(mgr ctrl.Manager, trust *Trust, guard *netguard.Guard) error {
	mapper, err := targetsource.NewMapper()
	if err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &gnmicv1alpha1.TargetSource{}).
		WithValidator(TargetSourceValidator{Mapper: mapper, Reader: mgr.GetAPIReader(), Trust: trust, Guard: guard}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v TargetSourceValidator) ValidateCreate(ctx context.Context, ts *gnmicv1alpha1.TargetSource) (admission.Warnings, error) {
	return v.validate(ctx, ts)
}

// ValidateUpdate implements admission.Validator.
func (v TargetSourceValidator) ValidateUpdate(ctx context.Context, _, ts *gnmicv1alpha1.TargetSource) (admission.Warnings, error) {
	return v.validate(ctx, ts)
}

// ValidateDelete implements admission.Validator; deletes are never blocked.
func (TargetSourceValidator) ValidateDelete(context.Context, *gnmicv1alpha1.TargetSource) (admission.Warnings, error) {
	return nil, nil
}

func (v TargetSourceValidator) validate(ctx context.Context, ts *gnmicv1alpha1.TargetSource) (admission.Warnings, error) {
	errs := ValidateTargetSource(ts, v.Mapper)
	if h := ts.Spec.Source.HTTP; h != nil && len(errs) == 0 {
		guard := v.Guard
		if guard == nil {
			guard = netguard.New()
		}
		if _, err := guard.CheckURL(h.URL); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "source", "http", "url"), targetsource.RedactRawURL(h.URL),
				err.Error()+" (an administrator can exempt a private range with --external-source-allow-cidrs)"))
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(gnmicv1alpha1.GroupVersion.WithKind("TargetSource").GroupKind(), ts.Name, errs)
	}
	if v.Trust.on() {
		uses, err := v.Trust.targetSourceUses(ctx, ts)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if err := v.Trust.refuse(ctx, "targetsources", ts.Name, uses); err != nil {
			return nil, err
		}
	}
	if v.Reader == nil {
		return nil, nil
	}
	return v.warnings(ctx, ts), nil
}

// ValidateTargetSource checks what the CRD schema cannot (CEL compilation) and repeats its cross-field rules so
// a request that bypasses them still gets a message naming the field.
func ValidateTargetSource(ts *gnmicv1alpha1.TargetSource, mapper *targetsource.Mapper) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if d := ts.Spec.Interval; d != nil {
		if d.Duration < 10*time.Second {
			errs = append(errs, field.Invalid(spec.Child("interval"), d.Duration.String(), "must be at least 10s"))
		}
	}
	if d := ts.Spec.Timeout; d != nil && d.Duration < time.Second {
		errs = append(errs, field.Invalid(spec.Child("timeout"), d.Duration.String(), "must be at least 1s"))
	}
	if p := ts.Spec.Target.Port; p < 0 || p > 65535 {
		errs = append(errs, field.Invalid(spec.Child("target", "port"), p, "must be from 1 to 65535"))
	}
	if r := ts.Spec.Prune.MaxDeleteRatio; r != nil && (*r < 0 || *r > 100) {
		errs = append(errs, field.Invalid(spec.Child("prune", "maxDeleteRatio"), *r, "must be from 0 to 100"))
	}
	if m := ts.Spec.MaxTargets; m != nil && *m < 0 {
		errs = append(errs, field.Invalid(spec.Child("maxTargets"), *m, "must be 0 (no cap) or more"))
	}
	src := spec.Child("source")
	s := ts.Spec.Source
	set := map[string]bool{gnmicv1alpha1.SourceTypeHTTP: s.HTTP != nil, gnmicv1alpha1.SourceTypeStatic: s.Static != nil,
		gnmicv1alpha1.SourceTypeConfigMap: s.ConfigMap != nil, gnmicv1alpha1.SourceTypeSecret: s.Secret != nil}
	fields := map[string]string{gnmicv1alpha1.SourceTypeHTTP: "http", gnmicv1alpha1.SourceTypeStatic: "static",
		gnmicv1alpha1.SourceTypeConfigMap: "configMap", gnmicv1alpha1.SourceTypeSecret: "secret"}
	if _, known := set[s.Type]; !known {
		errs = append(errs, field.NotSupported(src.Child("type"), s.Type, []string{"HTTP", "Static", "ConfigMap", "Secret"}))
	}
	for _, typ := range []string{"HTTP", "Static", "ConfigMap", "Secret"} {
		if set[typ] != (s.Type == typ) {
			errs = append(errs, field.Invalid(src.Child(fields[typ]), set[typ],
				fmt.Sprintf("must be set exactly when type is %s", typ)))
		}
	}
	if h := s.HTTP; h != nil {
		p := src.Child("http")
		if u, err := url.Parse(h.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, field.Invalid(p.Child("url"), h.URL, "must be an absolute http:// or https:// URL"))
		}
		if h.Body != "" && h.Method != "POST" {
			errs = append(errs, field.Invalid(p.Child("body"), "<body>", "is only allowed with method POST"))
		}
		if a := h.Auth; a != nil {
			n := 0
			for _, b := range []bool{a.Basic != nil, a.Token != nil, a.Header != nil} {
				if b {
					n++
				}
			}
			if n != 1 {
				errs = append(errs, field.Invalid(p.Child("auth"), n, "exactly one of basic, token or header must be set"))
			}
		}
		if pg := h.Pagination; pg != nil && pg.RequestParam != "" && pg.NextField == "" {
			errs = append(errs, field.Required(p.Child("pagination", "nextField"), "requestParam needs nextField"))
		}
		errs = append(errs, mappingErrors(mapper, h.Mapping, p.Child("mapping"))...)
	}
	if s.ConfigMap != nil {
		errs = append(errs, mappingErrors(mapper, s.ConfigMap.Mapping, src.Child("configMap", "mapping"))...)
	}
	if s.Secret != nil {
		errs = append(errs, mappingErrors(mapper, s.Secret.Mapping, src.Child("secret", "mapping"))...)
	}
	if s.Static != nil && len(s.Static.Devices) == 0 {
		errs = append(errs, field.Required(src.Child("static", "devices"), "at least one device"))
	}
	if w := ts.Spec.Webhook; w != nil && w.Enabled && (w.Auth == nil || (w.Auth.Bearer == nil && w.Auth.Signature == nil)) {
		errs = append(errs, field.Required(spec.Child("webhook", "auth"), "auth is required when the webhook is enabled"))
	}
	return errs
}

func mappingErrors(mapper *targetsource.Mapper, m *gnmicv1alpha1.Mapping, path *field.Path) field.ErrorList {
	if m == nil || mapper == nil {
		return nil
	}
	failed := mapper.CheckMapping(m)
	names := make([]string, 0, len(failed))
	for k := range failed {
		names = append(names, k)
	}
	sort.Strings(names)
	var errs field.ErrorList
	exprs := targetsource.MappingExpressions(m)
	for _, k := range names {
		errs = append(errs, field.Invalid(path.Child(k), exprs[k], "does not compile: "+failed[k].Error()))
	}
	return errs
}

// warnings names referenced Secrets, ConfigMaps and TargetProfiles that do not exist (yet).
func (v TargetSourceValidator) warnings(ctx context.Context, ts *gnmicv1alpha1.TargetSource) admission.Warnings {
	var out admission.Warnings
	missing := func(obj client.Object, kind, name, path string) {
		err := v.Reader.Get(ctx, types.NamespacedName{Namespace: ts.Namespace, Name: name}, obj)
		if apierrors.IsNotFound(err) {
			out = append(out, fmt.Sprintf("%s: %s %q does not exist in namespace %q (yet)", path, kind, name, ts.Namespace))
		}
	}
	s := ts.Spec.Source
	if s.ConfigMap != nil {
		missing(&corev1.ConfigMap{}, "ConfigMap", s.ConfigMap.Name, "spec.source.configMap.name")
	}
	if s.Secret != nil {
		missing(&corev1.Secret{}, "Secret", s.Secret.Name, "spec.source.secret.name")
	}
	if h := s.HTTP; h != nil {
		if a := h.Auth; a != nil {
			switch {
			case a.Basic != nil:
				missing(&corev1.Secret{}, "Secret", a.Basic.SecretRef.Name, "spec.source.http.auth.basic.secretRef")
			case a.Token != nil:
				missing(&corev1.Secret{}, "Secret", a.Token.SecretRef.Name, "spec.source.http.auth.token.secretRef")
			case a.Header != nil:
				missing(&corev1.Secret{}, "Secret", a.Header.SecretRef.Name, "spec.source.http.auth.header.secretRef")
			}
		}
		if t := h.TLS; t != nil {
			if t.CABundleRef != nil {
				missing(&corev1.ConfigMap{}, "ConfigMap", t.CABundleRef.Name, "spec.source.http.tls.caBundleRef")
			}
			if t.ClientCertRef != nil {
				missing(&corev1.Secret{}, "Secret", t.ClientCertRef.Name, "spec.source.http.tls.clientCertRef")
			}
		}
	}
	profiles := map[string]string{}
	if p := ts.Spec.Target.Profile; p != "" {
		profiles[p] = "spec.target.profile"
	}
	if s.Static != nil {
		for i, d := range s.Static.Devices {
			if d.Profile != "" {
				profiles[d.Profile] = fmt.Sprintf("spec.source.static.devices[%d].profile", i)
			}
		}
	}
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		missing(&gnmicv1alpha1.TargetProfile{}, "TargetProfile", n, profiles[n])
	}
	return out
}
