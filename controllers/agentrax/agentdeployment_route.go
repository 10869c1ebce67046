package agentrax

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/traffic"
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
	stable, canary, ok := traffic.Weights(route, ad.Name, canaryName(ad))
	if !ok {
		stable, canary = -1, -1
	}
	return rollout.RouteObservation{StableWeight: stable, CanaryWeight: canary, Accepted: traffic.Accepted(route)}, nil
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
			if !traffic.IsService(b.BackendRef) {
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
		s, c, ok := traffic.Weights(route, ad.Name, canaryName(ad))
		if !ok {
			s, c = 100, 0
		}
		if stable != nil {
			s, c = *stable, *canary
		}
		route.Labels = mergeLabels(route.Labels, childLabels(ad))
		route.Spec = traffic.OwnedRouteSpec(spec, ad.Name, canaryName(ad), ad.Spec.Port, s, c)
		return controllerutil.SetControllerReference(ad, route, r.Scheme())
	})
	return err
}
