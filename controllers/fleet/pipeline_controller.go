package fleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// PipelineControllerName is the controller name, unique across groups.
const PipelineControllerName = "fleet-pipeline"

// RateLimitedRequeue is how long a reconcile waits after Fleet answered 429 without a Retry-After header.
const RateLimitedRequeue = 10 * time.Second

// rateLimitWait is how long to wait after a 429: the server's Retry-After when it sent one, else
// RateLimitedRequeue.
func rateLimitWait(err error) time.Duration {
	if d := fleetclient.RetryAfter(err); d > 0 {
		return d
	}
	return RateLimitedRequeue
}

// fleetNameField indexes Pipelines by their Fleet name, to find same-named Pipelines without listing them all.
const fleetNameField = "fleet.name"

// Clients gives reconcilers the shared Fleet Management client.
type Clients interface {
	Client(ctx context.Context) (*fleetclient.Client, error)
	Invalidate()
}

// PipelineReconciler keeps a Fleet Management pipeline in line with each Pipeline CR.
type PipelineReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	Fleet    Clients
	// NameScope is the default name scope (--pipeline-name-scope): none or namespace.
	NameScope string
	// Cluster identifies this cluster in the ownership marker written into each pipeline's metadata.
	Cluster string
	// DriftInterval is how often managed pipelines are compared with Fleet and repaired (--fleet-drift-interval);
	// 0 means DefaultDriftInterval, a negative value never.
	DriftInterval time.Duration
	drift         drift
	// ReadOnlyPoll is how often a read-only Pipeline that no discovery refreshes mirrors its Fleet pipeline;
	// 0 means 5 minutes.
	ReadOnlyPoll time.Duration
	// NameTakenRetry is the first wait before a Pipeline whose name another Pipeline CR of this cluster holds looks
	// again; the waits then double up to NameTakenRequeue. 0 means RateLimitedRequeue (tests shorten it).
	NameTakenRetry time.Duration
	conflicts      nameConflicts
}

// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=pipelines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=pipelines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=pipelines/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=pipelinediscoveries,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the Pipeline, skips it when nothing changed, and otherwise upserts (or deletes) it in Fleet
// Management, patching status once at the end.
func (r *PipelineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &fleetv1alpha1.Pipeline{}
	if err := r.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.conflicts.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		r.conflicts.forget(req.NamespacedName)
		return r.finalize(ctx, p)
	}
	mode := pipelines.ModeOf(p)
	drifted := r.drift.of(req.NamespacedName)
	if drifted == nil && upToDate(p, mode) {
		return ctrl.Result{}, nil
	}
	before := p.DeepCopy()
	name := pipelines.FleetName(p, r.NameScope)
	if owner, err := r.nameOwner(ctx, p, name); err != nil {
		return ctrl.Result{}, err
	} else if owner != "" {
		r.collide(p, name, owner)
		return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, p)
	}
	if mode == pipelines.ModeManaged && controllerutil.AddFinalizer(p, fleetv1alpha1.PipelineFinalizer) {
		// The finalizer is stored before the first Fleet call, so a delete can always clean up.
		if err := r.Update(ctx, p); err != nil {
			return ctrl.Result{}, err
		}
		before = p.DeepCopy()
	}
	if mode == pipelines.ModeManaged && wasMirrored(p) {
		// The ID was only looked at: ownership is decided afresh by the create-first write.
		p.Status.ID, p.Status.SyncedName = "", ""
	}
	var res ctrl.Result
	var err error
	switch mode {
	case pipelines.ModeReadOnly:
		res, err = r.readOnly(ctx, p, before, name)
	case pipelines.ModePaused:
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonPaused,
			"spec.paused is set: no Fleet calls until it is unset")
		p.Status.ObservedGeneration = p.Generation
	default:
		res, err = r.upsert(ctx, p, name)
	}
	if drifted != nil && err == nil {
		if mode == pipelines.ModeManaged && meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.ConditionReady) {
			r.driftRepaired(p, drifted)
		} else {
			r.drift.clear(req.NamespacedName) // not written (refused, paused, read-only): the condition says why
		}
	}
	if perr := kube.PatchStatusIfChanged(ctx, r.Client, before, p); perr != nil && err == nil {
		err = perr
	}
	return res, err
}

// upToDate is the skip rule: the spec generation was synced and Ready reflects the current mode, so no Fleet
// call is needed. A ValidationError also counts: the same spec would be refused again.
func upToDate(p *fleetv1alpha1.Pipeline, mode pipelines.Mode) bool {
	if p.Status.ObservedGeneration != p.Generation {
		return false
	}
	ready := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionReady)
	synced := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionSynced)
	switch mode {
	case pipelines.ModeReadOnly:
		// Never skipped, and never a Fleet call for a discovery's CR: it only checks (in the cache) that its
		// discovery still exists; any other is mirrored on each requeue.
		return false
	case pipelines.ModePaused:
		return synced != nil && synced.Reason == fleetv1alpha1.ReasonPaused
	default:
		if ready == nil {
			return false
		}
		return (ready.Status == metav1.ConditionTrue && ready.Reason == fleetv1alpha1.ReasonSynced &&
			controllerutil.ContainsFinalizer(p, fleetv1alpha1.PipelineFinalizer) && len(p.Status.OrphanedPipelineIDs) == 0) ||
			ready.Reason == fleetv1alpha1.ReasonValidationError
	}
}

func (r *PipelineReconciler) failed(p *fleetv1alpha1.Pipeline, reason string, err error) {
	recordSync("Pipeline", reason)
	setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
	setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, reason, err.Error())
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, reason, "Upsert", "%v", err)
}

// finalize deletes the Fleet pipeline by status.id (never by annotation), unless the Pipeline is read-only,
// Grafana-sourced or paused, then removes the finalizer.
func (r *PipelineReconciler) finalize(ctx context.Context, p *fleetv1alpha1.Pipeline) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(p, fleetv1alpha1.PipelineFinalizer) {
		return ctrl.Result{}, nil
	}
	if pipelines.DeletesRemotely(p) && !p.Spec.Paused && !wasMirrored(p) {
		before := p.DeepCopy()
		fc, err := r.Fleet.Client(ctx)
		if err == nil {
			err = fc.DeletePipeline(ctx, p.Status.ID)
		}
		switch {
		case err == nil || fleetclient.IsNotFound(err):
			recordSync("Pipeline", "Deleted")
			r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted Fleet pipeline %s", p.Status.ID)
		case fleetclient.IsRateLimited(err):
			recordSync("Pipeline", fleetv1alpha1.ReasonRateLimited)
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "RateLimited", "Delete", "Fleet Management rate limit; retrying in %s", rateLimitWait(err))
			return ctrl.Result{RequeueAfter: rateLimitWait(err)}, nil
		default:
			recordSync("Pipeline", fleetv1alpha1.ReasonDeleteFailed)
			setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonDeleteFailed, err.Error())
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "DeleteFailed", "Delete", "Deleting Fleet pipeline %s: %v", p.Status.ID, err)
			// The error sends the reconcile into backoff: the finalizer stays and the delete is retried.
			if perr := kube.PatchStatusIfChanged(ctx, r.Client, before, p); perr != nil {
				return ctrl.Result{}, perr
			}
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(p, fleetv1alpha1.PipelineFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, p))
}

// nameOwner returns, when another Pipeline holds the same Fleet name, that Pipeline as namespace/name; "" when p
// may use the name. The holder is the one that synced under the name, else the oldest, else the first by key.
func (r *PipelineReconciler) nameOwner(ctx context.Context, p *fleetv1alpha1.Pipeline, name string) (string, error) {
	list := &fleetv1alpha1.PipelineList{}
	if err := r.List(ctx, list, client.MatchingFields{fleetNameField: name}); err != nil {
		return "", err
	}
	if len(list.Items) < 2 {
		return "", nil
	}
	// A Pipeline being deleted keeps its claim until it is gone: its finalizer deletes the Fleet pipeline by ID,
	// which would take a successor's pipeline (same name, same ID) with it.
	claims := list.Items
	sort.Slice(claims, func(i, j int) bool {
		a, b := &claims[i], &claims[j]
		ah, bh := a.Status.ID != "" && a.Status.SyncedName == name, b.Status.ID != "" && b.Status.SyncedName == name
		if ah != bh {
			return ah
		}
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	if w := claims[0]; w.Namespace != p.Namespace || w.Name != p.Name {
		return w.Namespace + "/" + w.Name, nil
	}
	return "", nil
}

func (r *PipelineReconciler) collide(p *fleetv1alpha1.Pipeline, name, owner string) {
	msg := fmt.Sprintf("Fleet pipeline name %q is already used by Pipeline %s; Fleet names are global to the stack: "+
		"set spec.name, or the %s=namespace annotation (or --pipeline-name-scope=namespace)", name, owner, fleetv1alpha1.AnnotationNameScope)
	if !meta.IsStatusConditionPresentAndEqual(p.Status.Conditions, fleetv1alpha1.ConditionReady, metav1.ConditionFalse) ||
		meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionReady).Reason != fleetv1alpha1.ReasonNameCollision {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonNameCollision, "Upsert", "%s", msg)
	}
	setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonNameCollision, msg)
	setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonNameCollision, msg)
}

func setCondition(obj interface {
	client.Object
}, typ string, status metav1.ConditionStatus, reason, msg string) {
	var conds *[]metav1.Condition
	switch o := obj.(type) {
	case *fleetv1alpha1.Pipeline:
		conds = &o.Status.Conditions
	case *fleetv1alpha1.Collector:
		conds = &o.Status.Conditions
	case *fleetv1alpha1.ExternalAttributeSync:
		conds = &o.Status.Conditions
	case *fleetv1alpha1.RemoteAttributePolicy:
		conds = &o.Status.Conditions
	case *fleetv1alpha1.PipelineDiscovery:
		conds = &o.Status.Conditions
	case *fleetv1alpha1.CollectorDiscovery:
		conds = &o.Status.Conditions
	case *fleetv1alpha1.TenantPolicy:
		conds = &o.Status.Conditions
	}
	meta.SetStatusCondition(conds, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: obj.GetGeneration()})
}

// SetupWithManager registers the controller: one reconcile at a time (every Pipeline shares the Fleet rate
// budget), no resync period, reacting to spec and annotation changes and to same-named Pipelines coming and
// going.
func (r *PipelineReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	initSyncOutcomes("Pipeline")
	r.drift.events = make(chan event.GenericEvent, 1024)
	if r.DriftInterval == 0 {
		r.DriftInterval = DefaultDriftInterval
	}
	if r.DriftInterval > 0 {
		if err := mgr.Add(r.driftCheck()); err != nil {
			return err
		}
	}
	if err := kube.IndexField(ctx, mgr, &fleetv1alpha1.Pipeline{}, fleetNameField, func(o client.Object) []string {
		return []string{pipelines.FleetName(o.(*fleetv1alpha1.Pipeline), r.NameScope)}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(PipelineControllerName).
		For(&fleetv1alpha1.Pipeline{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}))).
		Watches(&fleetv1alpha1.Pipeline{}, handler.EnqueueRequestsFromMapFunc(r.sameNamed),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				// A spec or annotation change may rename the Pipeline away from a contested name; the map function
				// sees both the old and the new object.
				UpdateFunc: func(e event.UpdateEvent) bool {
					return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
						e.ObjectOld.GetAnnotations()[fleetv1alpha1.AnnotationNameScope] != e.ObjectNew.GetAnnotations()[fleetv1alpha1.AnnotationNameScope]
				},
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Watches(&fleetv1alpha1.PipelineDiscovery{}, handler.EnqueueRequestsFromMapFunc(r.discoveredPipelines),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc:  func(e event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WatchesRawSource(source.Channel(r.drift.events, &handler.EnqueueRequestForObject{})).
		WithOptions(kube.ControllerOptions{MaxConcurrentReconciles: 1}.Options()).
		Complete(telemetry.TracedReconciler(PipelineControllerName, r))
}

// sameNamed wakes the other Pipelines with the same Fleet name when one is gone or renamed, so a collision
// resolves.
func (r *PipelineReconciler) sameNamed(ctx context.Context, o client.Object) []reconcile.Request {
	p, ok := o.(*fleetv1alpha1.Pipeline)
	if !ok {
		return nil
	}
	list := &fleetv1alpha1.PipelineList{}
	if err := r.List(ctx, list, client.MatchingFields{fleetNameField: pipelines.FleetName(p, r.NameScope)}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Namespace != p.Namespace || list.Items[i].Name != p.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
