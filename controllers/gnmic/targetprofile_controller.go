package gnmic

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// TargetProfileControllerName is the controller name, unique across groups.
const TargetProfileControllerName = "gnmic-targetprofile"

// missingCredentialsRecheck is how often a profile whose Secret is missing looks again. Secrets are not watched,
// so that the operator needs no list/watch on every Secret in the cluster just to see one appear.
const missingCredentialsRecheck = time.Minute

// TargetProfileReconciler reports how many Targets use a profile and whether its credentials Secret exists.
type TargetProfileReconciler struct {
	client.Client
	// APIReader reads Secret metadata straight from the API server (no Secret cache).
	APIReader client.Reader
	Recorder  recorder.EventRecorder
}

// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targetprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targetprofiles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconcile fetches the TargetProfile, runs its phases and patches status once, only if it changed.
func (r *TargetProfileReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	profile := &gnmicv1alpha1.TargetProfile{}
	if err := r.Get(ctx, req.NamespacedName, profile); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := profile.DeepCopy()
	if err := r.countTargets(ctx, profile); err != nil {
		return ctrl.Result{}, err
	}
	result, err := r.resolveCredentials(ctx, profile)
	if err != nil {
		return ctrl.Result{}, err
	}
	profile.Status.ObservedGeneration = profile.Generation
	return result, kube.PatchStatusIfChanged(ctx, r.Client, before, profile)
}

func (r *TargetProfileReconciler) countTargets(ctx context.Context, profile *gnmicv1alpha1.TargetProfile) error {
	targets := &gnmicv1alpha1.TargetList{}
	if err := r.List(ctx, targets, client.InNamespace(profile.Namespace),
		client.MatchingFields{targetProfileField: profile.Name}); err != nil {
		return err
	}
	profile.Status.Targets = int32(len(targets.Items))
	return nil
}

// resolveCredentials sets Ready from whether the credentials Secret exists, reading only its metadata.
func (r *TargetProfileReconciler) resolveCredentials(ctx context.Context, profile *gnmicv1alpha1.TargetProfile) (ctrl.Result, error) {
	cond := metav1.Condition{
		Type:               "Ready",
		Status:             metav1.ConditionTrue,
		Reason:             gnmicv1alpha1.ReasonCredentialsFound,
		Message:            "no credentials needed",
		ObservedGeneration: profile.Generation,
	}
	var result ctrl.Result
	if ref := profile.Spec.CredentialsRef; ref != nil {
		secret := &metav1.PartialObjectMetadata{}
		secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: profile.Namespace, Name: ref.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonCredentialsNotFound
			cond.Message = fmt.Sprintf("credentials Secret %q does not exist", ref.Name)
			if !meta.IsStatusConditionFalse(profile.Status.Conditions, cond.Type) {
				r.Recorder.Eventf(profile, nil, corev1.EventTypeWarning, cond.Reason, "ResolveCredentials", cond.Message)
			}
			result.RequeueAfter = missingCredentialsRecheck
		case err != nil:
			return result, err
		default:
			cond.Message = fmt.Sprintf("credentials Secret %q found", ref.Name)
		}
	}
	meta.SetStatusCondition(&profile.Status.Conditions, cond)
	return result, nil
}

// SetupWithManager registers the controller: profile spec changes, and Targets appearing, disappearing or
// switching profile.
func (r *TargetProfileReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if err := indexTargetsByProfile(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(TargetProfileControllerName).
		For(&gnmicv1alpha1.TargetProfile{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&gnmicv1alpha1.Target{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueueT) {
				q.Add(profileRequest(e.Object))
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueueT) {
				oldT, newT := e.ObjectOld.(*gnmicv1alpha1.Target), e.ObjectNew.(*gnmicv1alpha1.Target)
				if oldT.Spec.Profile != newT.Spec.Profile {
					q.Add(profileRequest(oldT))
					q.Add(profileRequest(newT))
				}
			},
			DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueueT) {
				q.Add(profileRequest(e.Object))
			},
		}).
		WithOptions(opts.Options()).
		Complete(telemetry.TracedReconciler(TargetProfileControllerName, r))
}

type workqueueT = workqueue.TypedRateLimitingInterface[reconcile.Request]

func profileRequest(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{
		Namespace: o.GetNamespace(), Name: o.(*gnmicv1alpha1.Target).Spec.Profile}}
}
