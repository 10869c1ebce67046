// Package traffic is the Gateway API side of agentrax canaries, without API calls: the owned HTTPRoute's spec,
// the stable/canary weights written in a route, and whether its Gateways accepted its current generation.
package traffic

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// Weights returns the stable and canary weights of every rule that sends traffic to the stable Service;
// ok is false when there is no such rule or the rules disagree. A backendRef without a weight weighs 1, the
// Gateway API default; a missing canary backendRef weighs 0.
func Weights(route *gatewayv1.HTTPRoute, stableSvc, canarySvc string) (stable, canary int32, ok bool) {
	found := false
	for _, rule := range route.Spec.Rules {
		var s, c int32
		hasStable := false
		for _, b := range rule.BackendRefs {
			if !IsService(b.BackendRef) {
				continue
			}
			switch string(b.Name) {
			case stableSvc:
				s, hasStable = ptr.Deref(b.Weight, 1), true
			case canarySvc:
				c = ptr.Deref(b.Weight, 1)
			}
		}
		if !hasStable {
			continue
		}
		if found && (s != stable || c != canary) {
			return 0, 0, false
		}
		stable, canary, found = s, c, true
	}
	return stable, canary, found
}

// IsService tells whether a backendRef names a core Service in the route's own namespace.
func IsService(b gatewayv1.BackendRef) bool {
	return ptr.Deref(b.Group, "") == "" && ptr.Deref(b.Kind, "Service") == "Service" && b.Namespace == nil
}

// Accepted reports whether every parentRef of the spec has a status entry whose Accepted condition is True for the
// route's current generation. Anything less means the Gateway has not applied the weights yet.
func Accepted(route *gatewayv1.HTTPRoute) bool {
	if len(route.Spec.ParentRefs) == 0 {
		return false
	}
	for _, ref := range route.Spec.ParentRefs {
		accepted := false
		for _, p := range route.Status.Parents {
			if !sameParent(ref, p.ParentRef, route.Namespace) {
				continue
			}
			c := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
			if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == route.Generation {
				accepted = true
			}
		}
		if !accepted {
			return false
		}
	}
	return true
}

func sameParent(a, b gatewayv1.ParentReference, ns string) bool {
	nsOf := func(p gatewayv1.ParentReference) string {
		return string(ptr.Deref(p.Namespace, gatewayv1.Namespace(ns)))
	}
	return a.Name == b.Name && nsOf(a) == nsOf(b) &&
		ptr.Deref(a.SectionName, "") == ptr.Deref(b.SectionName, "") &&
		ptr.Deref(a.Kind, "Gateway") == ptr.Deref(b.Kind, "Gateway") &&
		ptr.Deref(a.Group, gatewayv1.GroupName) == ptr.Deref(b.Group, gatewayv1.GroupName)
}

// OwnedRouteSpec is the owned route's spec, with the Gateway API's defaults written out so that an unchanged
// spec compares equal to what the API server stored.
func OwnedRouteSpec(spec *agentraxv1alpha1.OwnedRouteSpec, stableSvc, canarySvc string, port, stable, canary int32) gatewayv1.HTTPRouteSpec {
	var out gatewayv1.HTTPRouteSpec
	for _, p := range spec.ParentRefs {
		ref := gatewayv1.ParentReference{Group: ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
			Kind: ptr.To(gatewayv1.Kind("Gateway")), Name: gatewayv1.ObjectName(p.Name)}
		if p.Namespace != "" {
			ref.Namespace = ptr.To(gatewayv1.Namespace(p.Namespace))
		}
		if p.SectionName != "" {
			ref.SectionName = ptr.To(gatewayv1.SectionName(p.SectionName))
		}
		out.ParentRefs = append(out.ParentRefs, ref)
	}
	for _, h := range spec.Hostnames {
		out.Hostnames = append(out.Hostnames, gatewayv1.Hostname(h))
	}
	rule := gatewayv1.HTTPRouteRule{}
	for _, m := range spec.Matches {
		match := gatewayv1.HTTPRouteMatch{}
		if m.Path != nil {
			typ := gatewayv1.PathMatchPathPrefix
			if m.Path.Type == "Exact" {
				typ = gatewayv1.PathMatchExact
			}
			match.Path = &gatewayv1.HTTPPathMatch{Type: &typ, Value: ptr.To(m.Path.Value)}
		}
		for _, h := range m.Headers {
			match.Headers = append(match.Headers, gatewayv1.HTTPHeaderMatch{Type: ptr.To(gatewayv1.HeaderMatchExact),
				Name: gatewayv1.HTTPHeaderName(h.Name), Value: h.Value})
		}
		rule.Matches = append(rule.Matches, match)
	}
	if len(rule.Matches) == 0 {
		rule.Matches = []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
			Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}}}
	}
	rule.BackendRefs = []gatewayv1.HTTPBackendRef{serviceRef(stableSvc, port, stable)}
	if canary > 0 {
		// The canary's backendRef exists only while it has traffic: no reference to a Service that is gone.
		rule.BackendRefs = append(rule.BackendRefs, serviceRef(canarySvc, port, canary))
	}
	out.Rules = []gatewayv1.HTTPRouteRule{rule}
	return out
}

func serviceRef(name string, port, weight int32) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Group: ptr.To(gatewayv1.Group("")),
			Kind: ptr.To(gatewayv1.Kind("Service")), Name: gatewayv1.ObjectName(name),
			Port: ptr.To(port)},
		Weight: ptr.To(weight)}}
}
