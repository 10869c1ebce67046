package gnmic

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/plan"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// PipelineControllerName is the controller name, unique across groups.
const PipelineControllerName = "gnmic-pipeline"

// PipelineReconciler reports what a Pipeline resolves to: counts, missing references and whether its Cluster
// exists. Pushing is the Cluster controller's job.
type PipelineReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// DefaultImage is the collector image of Clusters that name none (--gnmic-default-image).
	DefaultImage string
}

// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=gnmicpipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=gnmicpipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=clusters;targets;targetprofiles;gnmicsubscriptions;gnmicoutputs;gnmicinputs;gnmicprocessors;gnmictunneltargetpolicies,verbs=get;list;watch

// Reconcile resolves the Pipeline and patches its status once, only if it changed.
func (r *PipelineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pl := &gnmicv1alpha1.GnmicPipeline{}
	if err := r.Get(ctx, req.NamespacedName, pl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := pl.DeepCopy()
	s := plan.Snapshot{Pipelines: []gnmicv1alpha1.GnmicPipeline{*pl}}
	profiles, err := readNamespace(ctx, r.Client, pl.Namespace, &s)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.Profiles = map[ktypes.NamespacedName]*gnmicv1alpha1.TargetProfile{}
	for i := range profiles {
		s.Profiles[client.ObjectKeyFromObject(&profiles[i])] = &profiles[i]
	}
	cluster := &gnmicv1alpha1.Cluster{}
	clusterErr := r.Get(ctx, ktypes.NamespacedName{Namespace: pl.Namespace, Name: pl.Spec.ClusterRef}, cluster)
	if clusterErr != nil && !apierrors.IsNotFound(clusterErr) {
		return ctrl.Result{}, clusterErr
	}
	defaultImage(cluster, r.DefaultImage)
	s.CollectorImage = cluster.Spec.Image
	// Enabled or not, report what the Pipeline would resolve to.
	s.Pipelines[0].Spec.Enabled = true
	res := plan.Build(s).Pipelines[plan.Name(pl.Namespace, pl.Name)]
	st := &pl.Status
	st.ObservedGeneration = pl.Generation
	st.TargetsCount, st.SubscriptionsCount = int32(res.Targets), int32(res.Subscriptions)
	st.OutputsCount, st.InputsCount, st.TunnelTargetPoliciesCount = int32(res.Outputs), int32(res.Inputs), int32(res.TunnelTargetPolicies)

	resolved := metav1.Condition{Type: gnmicv1alpha1.PipelineConditionResourcesResolved, Status: metav1.ConditionTrue,
		Reason: gnmicv1alpha1.ReasonResolved, Message: "every reference resolved", ObservedGeneration: pl.Generation}
	if len(res.Missing) > 0 {
		resolved.Status, resolved.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonMissingResources
		resolved.Message = "not found: " + strings.Join(res.Missing, ", ")
	}
	if len(res.Skipped) > 0 && resolved.Status == metav1.ConditionTrue {
		resolved.Message = fmt.Sprintf("%d targets are not pushed: the Pipeline has no subscription", len(res.Skipped))
	}
	if n := len(res.SkippedTunnelTargetPolicies); n > 0 && resolved.Status == metav1.ConditionTrue {
		resolved.Message = strings.TrimPrefix(resolved.Message+"; ", "every reference resolved; ") +
			fmt.Sprintf("%d tunnel target policies are not pushed: the Pipeline has no subscription", n)
	}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: gnmicv1alpha1.ReasonPipelineReady,
		Message: fmt.Sprintf("%d targets for Cluster %q", res.Targets, pl.Spec.ClusterRef), ObservedGeneration: pl.Generation}
	st.Status = gnmicv1alpha1.PipelineStatusActive
	switch {
	case !pl.Spec.Enabled:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, gnmicv1alpha1.ReasonDisabled, "spec.enabled is not true"
		st.Status = gnmicv1alpha1.PipelineStatusDisabled
	case apierrors.IsNotFound(clusterErr):
		ready.Status, ready.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonClusterNotFound
		ready.Message = fmt.Sprintf("Cluster %q does not exist", pl.Spec.ClusterRef)
		st.Status = gnmicv1alpha1.PipelineStatusIncomplete
	case len(res.Missing) > 0:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, resolved.Reason, resolved.Message
		st.Status = gnmicv1alpha1.PipelineStatusIncomplete
	case res.NoOutputs:
		ready.Status, ready.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonNoOutputs
		ready.Message = "the Pipeline selects no Output, so none of its targets or subscriptions is pushed"
		st.Status = gnmicv1alpha1.PipelineStatusIncomplete
	case len(res.Unsupported) > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonUnsupportedByCollector
		ready.Message = "left out: " + strings.Join(res.Unsupported, "; ")
		st.Status = gnmicv1alpha1.PipelineStatusIncomplete
	}
	if ready.Status == metav1.ConditionFalse && ready.Reason != gnmicv1alpha1.ReasonDisabled {
		if c := meta.FindStatusCondition(st.Conditions, "Ready"); c == nil || c.Reason != ready.Reason {
			r.Recorder.Eventf(pl, nil, corev1.EventTypeWarning, ready.Reason, "Resolve", ready.Message)
		}
	}
	meta.SetStatusCondition(&st.Conditions, resolved)
	meta.SetStatusCondition(&st.Conditions, ready)
	return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, pl)
}

// SetupWithManager registers the controller: Pipeline spec changes, its Cluster appearing or disappearing, and
// any change to the kinds it selects in its namespace.
func (r *PipelineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if err := kube.IndexField(ctx, mgr, &gnmicv1alpha1.GnmicPipeline{}, pipelineClusterIx, func(o client.Object) []string {
		return []string{o.(*gnmicv1alpha1.GnmicPipeline).Spec.ClusterRef}
	}); err != nil {
		return err
	}
	all := handler.EnqueueRequestsFromMapFunc(r.pipelinesInNamespace)
	specOrLabels := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))
	return ctrl.NewControllerManagedBy(mgr).
		Named(PipelineControllerName).
		For(&gnmicv1alpha1.GnmicPipeline{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A Cluster's image decides which features its Pipelines may use, so spec changes count too.
		Watches(&gnmicv1alpha1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.pipelinesOfCluster),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&gnmicv1alpha1.Target{}, all, specOrLabels).
		Watches(&gnmicv1alpha1.TargetProfile{}, all, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return false }})).
		Watches(&gnmicv1alpha1.Subscription{}, all, specOrLabels).
		Watches(&gnmicv1alpha1.Output{}, all, specOrLabels).
		Watches(&gnmicv1alpha1.Input{}, all, specOrLabels).
		Watches(&gnmicv1alpha1.Processor{}, all, specOrLabels).
		Watches(&gnmicv1alpha1.TunnelTargetPolicy{}, all, specOrLabels).
		WithOptions(opts.Options()).
		Complete(telemetry.TracedReconciler(PipelineControllerName, r))
}

func (r *PipelineReconciler) pipelinesOfCluster(ctx context.Context, c client.Object) []reconcile.Request {
	return r.pipelines(ctx, c.GetNamespace(), client.MatchingFields{pipelineClusterIx: c.GetName()})
}

func (r *PipelineReconciler) pipelinesInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	return r.pipelines(ctx, o.GetNamespace())
}

func (r *PipelineReconciler) pipelines(ctx context.Context, ns string, opts ...client.ListOption) []reconcile.Request {
	list := &gnmicv1alpha1.GnmicPipelineList{}
	if err := r.List(ctx, list, append(opts, client.InNamespace(ns))...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing Pipelines")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}
