package fleet

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/selector"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// RemoteAttributePolicyControllerName is the controller name, unique across groups.
const RemoteAttributePolicyControllerName = "fleet-remoteattributepolicy"

// RemoteAttributePolicyReconciler reports which Collector CRs of its namespace a policy matches. It makes no
// Fleet call: the Collector controller applies policies with its precedence.
type RemoteAttributePolicyReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// MaxConcurrentReconciles is --controller-policy-max-concurrent.
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=remoteattributepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=remoteattributepolicies/status,verbs=get;update;patch

// Reconcile recomputes the matched collectors and patches status once, when it changed.
func (r *RemoteAttributePolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &fleetv1alpha1.RemoteAttributePolicy{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := p.DeepCopy()
	err := r.match(ctx, p)
	if perr := kube.PatchStatusIfChanged(ctx, r.Client, before, p); perr != nil && err == nil {
		err = perr
	}
	return ctrl.Result{}, err
}

func (r *RemoteAttributePolicyReconciler) match(ctx context.Context, p *fleetv1alpha1.RemoteAttributePolicy) error {
	p.Status.ObservedGeneration = p.Generation
	ids, err := MatchingCollectorIDs(ctx, r.Client, p)
	if err != nil {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonListFailed, "Match", "%v", err)
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonListFailed, err.Error())
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonListFailed, err.Error())
		return err
	}
	p.Status.MatchedCount = int32(len(ids))
	if len(ids) > fleetv1alpha1.MaxMatchedCollectorIDs {
		msg := fmt.Sprintf("%d collectors match; status lists the first %d", len(ids), fleetv1alpha1.MaxMatchedCollectorIDs)
		if !meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.ConditionTruncated) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "Truncated", "Match", "%s", msg)
		}
		// Only the status list is cut: the Collector controller evaluates the selector itself, so every matched
		// collector still gets the attributes.
		ids = ids[:fleetv1alpha1.MaxMatchedCollectorIDs]
		setCondition(p, fleetv1alpha1.ConditionTruncated, metav1.ConditionTrue, fleetv1alpha1.ReasonMatchedIDsTruncated, msg)
	} else {
		setCondition(p, fleetv1alpha1.ConditionTruncated, metav1.ConditionFalse, fleetv1alpha1.ReasonNotTruncated, "every matched collector is listed")
	}
	p.Status.MatchedCollectorIDs = ids
	if len(ids) == 0 {
		msg := "no Collector in this namespace matches the selector"
		if !meta.IsStatusConditionPresentAndEqual(p.Status.Conditions, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, fleetv1alpha1.ReasonNoMatch, "Match", "%s", msg)
		}
		// Ready: the policy is valid and evaluated; Synced=False says it applies nowhere.
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonNoMatch, msg)
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonNoMatch, msg)
		return nil
	}
	msg := fmt.Sprintf("matches %d collector(s)", p.Status.MatchedCount)
	if !meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.ConditionSynced) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, fleetv1alpha1.ReasonSynced, "Match", "%s", msg)
	}
	setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonMatched, msg)
	setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionTrue, fleetv1alpha1.ReasonMatched, msg)
	return nil
}

// MatchingCollectorIDs are the sorted IDs of the Collector CRs of p's namespace that p selects. IDs listed in
// the selector are looked up through the spec.id index; matchers need every Collector of the namespace (from
// the cache's namespace index), since a regex cannot be looked up.
func MatchingCollectorIDs(ctx context.Context, c client.Reader, p *fleetv1alpha1.RemoteAttributePolicy) ([]string, error) {
	sel, err := selector.Compile(p.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var ids []string
	add := func(list *fleetv1alpha1.CollectorList) {
		for i := range list.Items {
			if col := &list.Items[i]; col.DeletionTimestamp.IsZero() && sel.MatchesCollector(col) {
				ids = append(ids, col.Spec.ID)
			}
		}
	}
	if len(p.Spec.Selector.Matchers) > 0 {
		list := &fleetv1alpha1.CollectorList{}
		if err := c.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
			return nil, err
		}
		add(list)
	} else {
		for _, id := range p.Spec.Selector.CollectorIDs {
			list := &fleetv1alpha1.CollectorList{}
			if err := c.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingFields{collectorIDField: id}); err != nil {
				return nil, err
			}
			add(list)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// SetupWithManager registers the controller: policy spec changes and any Collector change in the namespace
// (attributes decide matches) wake it.
func (r *RemoteAttributePolicyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := indexCollectors(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(RemoteAttributePolicyControllerName).
		For(&fleetv1alpha1.RemoteAttributePolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleetv1alpha1.Collector{}, handler.EnqueueRequestsFromMapFunc(r.policiesOf)).
		WithOptions(kube.ControllerOptions{MaxConcurrentReconciles: r.MaxConcurrentReconciles}.Options()).
		Complete(telemetry.TracedReconciler(RemoteAttributePolicyControllerName, r))
}

// policiesOf are the policies of a Collector's namespace.
func (r *RemoteAttributePolicyReconciler) policiesOf(ctx context.Context, o client.Object) []reconcile.Request {
	list := &fleetv1alpha1.RemoteAttributePolicyList{}
	if err := r.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}
