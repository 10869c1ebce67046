package agentrax

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
)

// validateTraffic checks spec.rollout.traffic: exactly one of route and routeName, and an owned route that
// names its Gateways and carries well-formed hostnames and matches (the Gateway API would otherwise refuse the
// route the operator writes, and the rollout would stall on a route that is never accepted).
func validateTraffic(p *field.Path, t *agentraxv1alpha1.TrafficSpec) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	switch {
	case t.Route == nil && t.RouteName == "":
		return append(errs, field.Required(p, "set route (an HTTPRoute the operator owns) or routeName (a user-owned HTTPRoute whose weights the operator edits)"))
	case t.Route != nil && t.RouteName != "":
		return append(errs, field.Invalid(p, "route and routeName", "set only one of route and routeName"))
	case t.RouteName != "":
		if msgs := validation.IsDNS1123Subdomain(t.RouteName); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("routeName"), t.RouteName, strings.Join(msgs, "; ")))
		}
		return errs
	}
	rp := p.Child("route")
	if len(t.Route.ParentRefs) == 0 {
		errs = append(errs, field.Required(rp.Child("parentRefs"), "the Gateway the route attaches to"))
	}
	for i, ref := range t.Route.ParentRefs {
		pp := rp.Child("parentRefs").Index(i)
		if msgs := validation.IsDNS1123Subdomain(ref.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pp.Child("name"), ref.Name, strings.Join(msgs, "; ")))
		}
		if ref.Namespace != "" {
			if msgs := validation.IsDNS1123Label(ref.Namespace); len(msgs) > 0 {
				errs = append(errs, field.Invalid(pp.Child("namespace"), ref.Namespace, strings.Join(msgs, "; ")))
			}
		}
	}
	for i, h := range t.Route.Hostnames {
		hp := rp.Child("hostnames").Index(i)
		name := strings.TrimPrefix(h, "*.")
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 || strings.Contains(name, "*") {
			errs = append(errs, field.Invalid(hp, h, "must be a DNS name, optionally with a leading \"*.\" wildcard label"))
		}
	}
	for i, m := range t.Route.Matches {
		mp := rp.Child("matches").Index(i)
		if m.Path != nil {
			switch m.Path.Type {
			case "", "Exact", "PathPrefix":
			default:
				errs = append(errs, field.NotSupported(mp.Child("path", "type"), m.Path.Type, []string{"Exact", "PathPrefix"}))
			}
			if !strings.HasPrefix(m.Path.Value, "/") {
				errs = append(errs, field.Invalid(mp.Child("path", "value"), m.Path.Value, "must start with \"/\""))
			}
		}
		for j, h := range m.Headers {
			if msgs := validation.IsHTTPHeaderName(h.Name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(mp.Child("headers").Index(j).Child("name"), h.Name, strings.Join(msgs, "; ")))
			}
		}
	}
	return errs
}

// canaryMetrics maps spec.rollout.metrics onto the query builder's names.
func canaryMetrics(m *agentraxv1alpha1.CanaryMetricsSpec) rollout.Metrics {
	if m == nil {
		return rollout.Metrics{}
	}
	return rollout.Metrics{Requests: m.Requests, DurationBucket: m.DurationBucket, CodeLabel: m.CodeLabel,
		VariantLabel: m.VariantLabel, AppLabel: m.AppLabel, NamespaceLabel: m.NamespaceLabel}
}

// warnings are admission warnings for specs that are valid but will not do what their author likely expects.
func warnings(ad *agentraxv1alpha1.AgentDeployment) admission.Warnings {
	r := ad.Spec.Rollout
	if r != nil && r.Strategy == agentraxv1alpha1.StrategyCanary && r.Traffic == nil {
		return admission.Warnings{"spec.rollout.traffic is not set: with strategy Canary no canary starts " +
			"until a route (operator-owned) or routeName (user-owned HTTPRoute) is given"}
	}
	return nil
}
