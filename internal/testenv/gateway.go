package testenv

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// GatewayStandInController is the controller name the tests' stand-in Gateway controller accepts routes as.
const GatewayStandInController = "example.net/gateway-controller"

// AcceptRoute plays a Gateway controller for one HTTPRoute: unless every parent already accepted the route's current
// generation, it writes an Accepted status for each parent. No Gateway implementation runs in the local control
// plane, and a route is not a built-in object. It reports whether it wrote the status.
func AcceptRoute(ctx context.Context, c client.Client, route *gatewayv1.HTTPRoute) (bool, error) {
	current := len(route.Status.Parents) == len(route.Spec.ParentRefs)
	for _, p := range route.Status.Parents {
		cond := meta.FindStatusCondition(p.Conditions, string(gatewayv1.RouteConditionAccepted))
		current = current && cond != nil && cond.ObservedGeneration == route.Generation
	}
	if current {
		return false, nil
	}
	route.Status.Parents = nil
	for _, ref := range route.Spec.ParentRefs {
		route.Status.Parents = append(route.Status.Parents, gatewayv1.RouteParentStatus{ParentRef: ref,
			ControllerName: GatewayStandInController, Conditions: []metav1.Condition{{
				Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: "Accepted",
				ObservedGeneration: route.Generation, LastTransitionTime: metav1.Now()}}})
	}
	if err := c.Status().Update(ctx, route); err != nil {
		return false, err
	}
	return true, nil
}
