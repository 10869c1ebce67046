// Package gnmic holds the reconcilers of the operator.gnmic.dev group.
package gnmic

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetstatus"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// TargetControllerName is the controller name, unique across groups.
const TargetControllerName = "gnmic-target"

// targetProfileField indexes Targets by spec.profile, so a TargetProfile event finds its Targets without a List of
// the whole namespace.
const targetProfileField = "spec.profile"

// TargetReconciler keeps a Target's status summary and its ProfileResolved and Ready conditions current.
type TargetReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
}

// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targets,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targetprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the Target, runs its phases and patches status once, only if it changed.
func (r *TargetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	target := &gnmicv1alpha1.Target{}
	if err := r.Get(ctx, req.NamespacedName, target); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := target.DeepCopy()
	for _, phase := range []func(context.Context, *gnmicv1alpha1.Target) error{
		r.resolveProfile,
		r.summarizeClusters,
	} {
		if err := phase(ctx, target); err != nil {
			return ctrl.Result{}, err
		}
	}
	target.Status.ObservedGeneration = target.Generation
	return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, target)
}

// resolveProfile sets ProfileResolved from whether spec.profile exists, with an event when it goes missing.
func (r *TargetReconciler) resolveProfile(ctx context.Context, target *gnmicv1alpha1.Target) error {
	profile := &gnmicv1alpha1.TargetProfile{}
	err := r.Get(ctx, types.NamespacedName{Namespace: target.Namespace, Name: target.Spec.Profile}, profile)
	cond := metav1.Condition{
		Type:               gnmicv1alpha1.TargetConditionProfileResolved,
		Status:             metav1.ConditionTrue,
		Reason:             gnmicv1alpha1.ReasonProfileFound,
		Message:            fmt.Sprintf("TargetProfile %q found", target.Spec.Profile),
		ObservedGeneration: target.Generation,
	}
	switch {
	case apierrors.IsNotFound(err):
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonProfileNotFound
		cond.Message = fmt.Sprintf("TargetProfile %q does not exist in namespace %q", target.Spec.Profile, target.Namespace)
		if !meta.IsStatusConditionFalse(target.Status.Conditions, cond.Type) {
			r.Recorder.Eventf(target, nil, corev1.EventTypeWarning, cond.Reason, "ResolveProfile", cond.Message)
		}
	case err != nil:
		return err
	}
	meta.SetStatusCondition(&target.Status.Conditions, cond)
	return nil
}

// summarizeClusters derives status.clusters, status.connectionState and the Ready condition from
// status.clusterStates and ProfileResolved.
func (r *TargetReconciler) summarizeClusters(_ context.Context, target *gnmicv1alpha1.Target) error {
	target.Status.Clusters, target.Status.ConnectionState = targetstatus.Summarize(target.Status.ClusterStates)
	resolved := meta.IsStatusConditionTrue(target.Status.Conditions, gnmicv1alpha1.TargetConditionProfileResolved)
	meta.SetStatusCondition(&target.Status.Conditions,
		targetstatus.Ready(target.Generation, resolved, target.Spec.Profile, target.Status.ClusterStates))
	return nil
}

// SetupWithManager registers the controller. Target events of every kind matter (clusterStates arrive as status
// writes), so there is no generation filter; the status patch is skipped when nothing changed, so the controller's
// own writes settle after one pass.
func (r *TargetReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if err := indexTargetsByProfile(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(TargetControllerName).
		For(&gnmicv1alpha1.Target{}).
		Watches(&gnmicv1alpha1.TargetProfile{}, handler.EnqueueRequestsFromMapFunc(r.targetsForProfile),
			builder.WithPredicates(predicate.Funcs{
				// Only a profile appearing or disappearing changes ProfileResolved.
				UpdateFunc: func(e event.UpdateEvent) bool { return false },
			})).
		WithOptions(opts.Options()).
		Complete(telemetry.TracedReconciler(TargetControllerName, r))
}

func (r *TargetReconciler) targetsForProfile(ctx context.Context, profile client.Object) []reconcile.Request {
	targets := &gnmicv1alpha1.TargetList{}
	if err := r.List(ctx, targets, client.InNamespace(profile.GetNamespace()),
		client.MatchingFields{targetProfileField: profile.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Targets for TargetProfile", "profile", profile.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(targets.Items))
	for i := range targets.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&targets.Items[i])})
	}
	return reqs
}

func indexTargetsByProfile(ctx context.Context, mgr ctrl.Manager) error {
	return kube.IndexField(ctx, mgr, &gnmicv1alpha1.Target{}, targetProfileField, func(o client.Object) []string {
		return []string{o.(*gnmicv1alpha1.Target).Spec.Profile}
	})
}
