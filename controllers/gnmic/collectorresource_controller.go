package gnmic

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// CollectorResourceControllerName runs the status controllers of the five collector-configuration kinds
// (Subscription, Output, Input, Processor, TunnelTargetPolicy); each registers as "<this>-<kind>".
const CollectorResourceControllerName = "gnmic-collectorresource"

// pipelineRefsIxPrefix + kind indexes GnmicPipelines by the names they reference of that kind; a Pipeline with any
// selector for the kind also carries selectorIxValue, so both lookups are index reads, never a namespace List.
const (
	pipelineRefsIxPrefix = "spec.references."
	// selectorIxValue cannot be an object name (names never hold a space).
	selectorIxValue = "has selectors"
)

// collectorResource is a collector-configuration object: a status this controller owns.
type collectorResource interface {
	client.Object
	CollectorStatus() *gnmicv1alpha1.CollectorResourceStatus
}

// collectorResourceKind describes one kind to the shared reconciler.
type collectorResourceKind struct {
	kind     string
	newObj   func() collectorResource
	newList  func() client.ObjectList
	validate func(client.Object) field.ErrorList
}

// collectorResourceKinds are the five kinds, with the validation the webhook also runs (an object admitted while
// the webhook was down or before a rule existed still gets reported).
var collectorResourceKinds = []collectorResourceKind{
	{"Subscription", func() collectorResource { return &gnmicv1alpha1.Subscription{} },
		func() client.ObjectList { return &gnmicv1alpha1.SubscriptionList{} },
		func(o client.Object) field.ErrorList {
			return gnmicv1alpha1.ValidateSubscription(o.(*gnmicv1alpha1.Subscription))
		}},
	{"Output", func() collectorResource { return &gnmicv1alpha1.Output{} },
		func() client.ObjectList { return &gnmicv1alpha1.OutputList{} },
		func(o client.Object) field.ErrorList { return gnmicv1alpha1.ValidateOutput(o.(*gnmicv1alpha1.Output)) }},
	{"Input", func() collectorResource { return &gnmicv1alpha1.Input{} },
		func() client.ObjectList { return &gnmicv1alpha1.InputList{} },
		func(o client.Object) field.ErrorList { return gnmicv1alpha1.ValidateInput(o.(*gnmicv1alpha1.Input)) }},
	{"Processor", func() collectorResource { return &gnmicv1alpha1.Processor{} },
		func() client.ObjectList { return &gnmicv1alpha1.ProcessorList{} },
		func(o client.Object) field.ErrorList {
			return gnmicv1alpha1.ValidateProcessor(o.(*gnmicv1alpha1.Processor))
		}},
	{"TunnelTargetPolicy", func() collectorResource { return &gnmicv1alpha1.TunnelTargetPolicy{} },
		func() client.ObjectList { return &gnmicv1alpha1.TunnelTargetPolicyList{} },
		func(o client.Object) field.ErrorList {
			return gnmicv1alpha1.ValidateTunnelTargetPolicy(o.(*gnmicv1alpha1.TunnelTargetPolicy))
		}},
}

// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=gnmicsubscriptions;gnmicoutputs;gnmicinputs;gnmicprocessors;gnmictunneltargetpolicies;gnmicpipelines,verbs=get;list;watch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=gnmicsubscriptions/status;gnmicoutputs/status;gnmicinputs/status;gnmicprocessors/status;gnmictunneltargetpolicies/status,verbs=get;update;patch

// CollectorResourceReconciler reports, for one collector-configuration kind, whether each object's spec is valid
// (Ready) and which GnmicPipelines reference it.
type CollectorResourceReconciler struct {
	client.Client
	kind collectorResourceKind
}

// SetupCollectorResourceControllers registers one status controller per collector-configuration kind.
func SetupCollectorResourceControllers(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	for _, k := range collectorResourceKinds {
		r := &CollectorResourceReconciler{Client: mgr.GetClient(), kind: k}
		if err := r.setup(ctx, mgr, opts); err != nil {
			return fmt.Errorf("%s status controller: %w", k.kind, err)
		}
	}
	return nil
}

// Reconcile validates the object, finds the Pipelines referencing it and patches status only if it changed.
func (r *CollectorResourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.kind.newObj()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := obj.DeepCopyObject().(client.Object)
	status := obj.CollectorStatus()
	pipelines, err := r.referencingPipelines(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	status.Pipelines = pipelines
	status.PipelinesCount = int32(len(pipelines))
	status.ObservedGeneration = obj.GetGeneration()
	meta.SetStatusCondition(&status.Conditions, readyCondition(r.kind.validate(obj), obj.GetGeneration()))
	return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, obj)
}

// readyCondition is Ready=True Valid, or Ready=False Invalid with the validation errors (which name the fields).
func readyCondition(errs field.ErrorList, generation int64) metav1.Condition {
	cond := metav1.Condition{Type: gnmicv1alpha1.CollectorResourceConditionReady, Status: metav1.ConditionTrue,
		Reason: gnmicv1alpha1.ReasonValid, Message: "the spec is valid", ObservedGeneration: generation}
	if len(errs) > 0 {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, gnmicv1alpha1.ReasonInvalid, errs.ToAggregate().Error()
	}
	return cond
}

// referencingPipelines returns the sorted names of the Pipelines in obj's namespace naming it or selecting it.
func (r *CollectorResourceReconciler) referencingPipelines(ctx context.Context, obj client.Object) ([]string, error) {
	ix := pipelineRefsIxPrefix + r.kind.kind
	var names []string
	for _, value := range []string{obj.GetName(), selectorIxValue} {
		list := &gnmicv1alpha1.GnmicPipelineList{}
		if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{ix: value}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			refs, selectors := p.Spec.References(r.kind.kind)
			if slices.Contains(refs, obj.GetName()) || selectsLabels(selectors, obj.GetLabels()) {
				names = append(names, p.Name)
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// selectsLabels tells whether any selector matches; an empty selector matches nothing, as in Pipeline resolution,
// and an invalid one (the webhook refuses those) matches nothing either.
func selectsLabels(selectors []metav1.LabelSelector, set map[string]string) bool {
	for i := range selectors {
		if len(selectors[i].MatchLabels) == 0 && len(selectors[i].MatchExpressions) == 0 {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&selectors[i])
		if err == nil && sel.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}

// pipelineReferenceIndex extracts, for one kind, the names a Pipeline references plus selectorIxValue when it
// selects by label.
func pipelineReferenceIndex(kind string) client.IndexerFunc {
	return func(o client.Object) []string {
		refs, selectors := o.(*gnmicv1alpha1.GnmicPipeline).Spec.References(kind)
		values := slices.Clone(refs)
		if len(selectors) > 0 {
			values = append(values, selectorIxValue)
		}
		return values
	}
}

func (r *CollectorResourceReconciler) setup(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if err := kube.IndexField(ctx, mgr, &gnmicv1alpha1.GnmicPipeline{}, pipelineRefsIxPrefix+r.kind.kind,
		pipelineReferenceIndex(r.kind.kind)); err != nil {
		return err
	}
	name := CollectorResourceControllerName + "-" + r.kind.kind
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		// Labels decide which selectors match, so a label change counts like a spec change; the controller's own
		// status writes change neither and settle after one pass.
		For(r.kind.newObj(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// An update maps both the old and the new Pipeline, so objects a Pipeline stops referencing are updated too.
		Watches(&gnmicv1alpha1.GnmicPipeline{}, handler.EnqueueRequestsFromMapFunc(r.objectsOfPipeline),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(opts.Options()).
		Complete(telemetry.TracedReconciler(name, r))
}

// objectsOfPipeline maps a Pipeline to the objects of this kind it names or selects.
func (r *CollectorResourceReconciler) objectsOfPipeline(ctx context.Context, o client.Object) []reconcile.Request {
	p := o.(*gnmicv1alpha1.GnmicPipeline)
	refs, selectors := p.Spec.References(r.kind.kind)
	var reqs []reconcile.Request
	for _, name := range refs {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.Namespace, Name: name}})
	}
	if len(selectors) == 0 {
		return reqs
	}
	list := r.kind.newList()
	if err := r.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing objects a Pipeline selects", "kind", r.kind.kind)
		return reqs
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "reading a list", "kind", r.kind.kind)
		return reqs
	}
	for _, item := range items {
		obj := item.(client.Object)
		if selectsLabels(selectors, obj.GetLabels()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
	}
	return reqs
}
