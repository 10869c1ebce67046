package agentrax

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/rollout"
)

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;patch;delete

// routeNameField indexes AgentDeployments by spec.rollout.traffic.routeName, so a change to a user-owned
// HTTPRoute (its status.parents above all) wakes the agent that edits its weights.
const routeNameField = "spec.rollout.traffic.routeName"

func routeNameOf(o client.Object) []string {
	ad, ok := o.(*agentraxv1alpha1.AgentDeployment)
	if !ok || ad.Spec.Rollout == nil || ad.Spec.Rollout.Traffic == nil || ad.Spec.Rollout.Traffic.RouteName == "" {
		return nil
	}
	return []string{ad.Spec.Rollout.Traffic.RouteName}
}

func newRoute() *gatewayv1.HTTPRoute { return &gatewayv1.HTTPRoute{} }

// routeKey is the HTTPRoute that splits ad's traffic: the owned one is named after the agent.
func routeKey(ad *agentraxv1alpha1.AgentDeployment) (types.NamespacedName, bool, error) {
	t := ad.Spec.Rollout.Traffic
	switch {
	case t == nil:
		return types.NamespacedName{}, false, fmt.Errorf("spec.rollout.traffic is not set")
	case t.RouteName != "":
		return types.NamespacedName{Namespace: ad.Namespace, Name: t.RouteName}, false, nil
	}
	return types.NamespacedName{Namespace: ad.Namespace, Name: ad.Name}, true, nil
}

// observeRoute reads the weights as written in the route's spec and whether every parent accepted the route's
// current generation. No traffic configuration means no route: all traffic goes to the stable Service.
func (r *AgentDeploymentReconciler) observeRoute(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment) (rollout.RouteObservation, error) {
	if ad.Spec.Rollout == nil || ad.Spec.Rollout.Traffic == nil {
		return rollout.RouteObservation{StableWeight: 100, Accepted: true}, nil
	}
	key, _, err := routeKey(ad)
	if err != nil {
		return rollout.RouteObservation{}, err
	}
	route := newRoute()
	if err := r.Get(ctx, key, route); err != nil {
		if apierrors.IsNotFound(err) {
			// Weights that match no step make the rollout write them, which reports the missing route.
			return rollout.RouteObservation{StableWeight: -1, CanaryWeight: -1}, nil
		}
		return rollout.RouteObservation{}, err
	}
	stable, canary, ok := routeWeights(route, ad.Name, canaryName(ad))
	if !ok {
		stable, canary = -1, -1
	}
	return rollout.RouteObservation{StableWeight: stable, CanaryWeight: canary, Accepted: routeAccepted(route)}, nil
}

// routeWeights returns the stable and canary weights of every rule that sends traffic to the stable Service;
// ok is false when there is no such rule or the rules disagree. A backendRef without a weight weighs 1, the
// Gateway API default; a missing canary backendRef weighs 0.
func routeWeights(route *gatewayv1.HTTPRoute, stableSvc, canarySvc string) (stable, canary int32, ok bool) {
	found := false
	for _, rule := range route.Spec.Rules {
		var s, c int32
		hasStable := false
		for _, b := range rule.BackendRefs {
			if !isService(b.BackendRef) {
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

func isService(b gatewayv1.BackendRef) bool {
	return ptr.Deref(b.Group, "") == "" && ptr.Deref(b.Kind, "Service") == "Service" && b.Namespace == nil
}

// routeAccepted: every parentRef of the spec has a status entry whose Accepted condition is True for the
// route's current generation. Anything less means the Gateway has not applied the weights yet.
func routeAccepted(route *gatewayv1.HTTPRoute) bool {
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

// setWeights writes the split: into the owned route (created when missing), or only into the weights of the
// stable and canary backendRefs of a user-owned route, with the route's resourceVersion so a concurrent edit by
// its owner is never overwritten.
func (r *AgentDeploymentReconciler) setWeights(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, stable, canary int32) error {
	key, owned, err := routeKey(ad)
	if err != nil {
		return err
	}
	if owned {
		return r.ensureOwnedRoute(ctx, ad, &stable, &canary)
	}
	route := newRoute()
	if err := r.Get(ctx, key, route); err != nil {
		return fmt.Errorf("spec.rollout.traffic.routeName: HTTPRoute %s: %w", key, err)
	}
	edited := false
	for i := range route.Spec.Rules {
		rule := &route.Spec.Rules[i]
		si, ci := -1, -1
		for j, b := range rule.BackendRefs {
			if !isService(b.BackendRef) {
				continue
			}
			switch string(b.Name) {
			case ad.Name:
				si = j
			case canaryName(ad):
				ci = j
			}
		}
		if si < 0 {
			continue
		}
		if ci < 0 && canary > 0 {
			return fmt.Errorf("HTTPRoute %s rule %d sends traffic to Service %s but has no backendRef to Service %s: "+
				"add it (weight 0) so the canary can get traffic", key, i, ad.Name, canaryName(ad))
		}
		rule.BackendRefs[si].Weight = ptr.To(stable)
		if ci >= 0 {
			rule.BackendRefs[ci].Weight = ptr.To(canary)
		}
		edited = true
	}
	if !edited {
		return fmt.Errorf("HTTPRoute %s has no rule with a backendRef to Service %s", key, ad.Name)
	}
	return r.Update(ctx, route)
}

// ensureOwnedRoute creates or updates the operator-owned route from spec.rollout.traffic.route. With nil
// weights the current ones are kept (100/0 for a new route), so reconciling the route's shape never moves
// traffic; only the rollout's SetWeights does. A same-named route the operator does not control is refused.
func (r *AgentDeploymentReconciler) ensureOwnedRoute(ctx context.Context, ad *agentraxv1alpha1.AgentDeployment, stable, canary *int32) error {
	spec := ad.Spec.Rollout.Traffic.Route
	route := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ad.Namespace, Name: ad.Name}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, route, func() error {
		if !route.CreationTimestamp.IsZero() && !metav1.IsControlledBy(route, ad) {
			return fmt.Errorf("HTTPRoute %s/%s exists and is not owned by this AgentDeployment: name it in "+
				"spec.rollout.traffic.routeName to use it, or delete it", ad.Namespace, ad.Name)
		}
		s, c, ok := routeWeights(route, ad.Name, canaryName(ad))
		if !ok {
			s, c = 100, 0
		}
		if stable != nil {
			s, c = *stable, *canary
		}
		route.Labels = mergeLabels(route.Labels, childLabels(ad))
		route.Spec = desiredRoute(ad, spec, s, c)
		return controllerutil.SetControllerReference(ad, route, r.Scheme())
	})
	return err
}

// desiredRoute is the owned route's spec, with the Gateway API's defaults written out so that an unchanged
// spec compares equal to what the API server stored.
func desiredRoute(ad *agentraxv1alpha1.AgentDeployment, spec *agentraxv1alpha1.OwnedRouteSpec, stable, canary int32) gatewayv1.HTTPRouteSpec {
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
	rule.BackendRefs = []gatewayv1.HTTPBackendRef{serviceRef(ad.Name, ad.Spec.Port, stable)}
	if canary > 0 {
		// The canary's backendRef exists only while it has traffic: no reference to a Service that is gone.
		rule.BackendRefs = append(rule.BackendRefs, serviceRef(canaryName(ad), ad.Spec.Port, canary))
	}
	out.Rules = []gatewayv1.HTTPRouteRule{rule}
	return out
}

func serviceRef(name string, port, weight int32) gatewayv1.HTTPBackendRef {
	return gatewayv1.HTTPBackendRef{BackendRef: gatewayv1.BackendRef{
		BackendObjectReference: gatewayv1.BackendObjectReference{Group: ptr.To(gatewayv1.Group("")),
			Kind: ptr.To(gatewayv1.Kind("Service")), Name: gatewayv1.ObjectName(name),
			Port: ptr.To(gatewayv1.PortNumber(port))},
		Weight: ptr.To(weight)}}
}
