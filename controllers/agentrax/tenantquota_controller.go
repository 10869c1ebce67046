package agentrax

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// TenantQuotaControllerName is the controller name, unique across groups.
const TenantQuotaControllerName = "agentrax-tenantquota"

// DefaultUsageDelay is how long the controller waits after an AgentDeployment event or a ledger write before it
// recounts a quota. Events within the delay coalesce into one reconcile, so a burst of admissions costs about
// one status write per quota and delay instead of one per admission; each of those writes moves the quota's
// resourceVersion and costs the next admission one extra read. Tests may shorten it.
var DefaultUsageDelay = time.Second

// DefaultSettleGrace is how long a reservation is left alone after admission raised it: its object may still be
// on its way to storage. It is well above the webhook timeout (10 s); tests shorten it.
var DefaultSettleGrace = 30 * time.Second

// DefaultPodsGoneRecheck is how often a quota is looked at again while a leaving agent's pods still exist. Pods
// carry no reference to their quota and the controller keeps no Pod cache of its own, so it asks the API server
// on a timer instead of watching; it only runs while some agent of the quota is leaving. Tests may shorten it.
var DefaultPodsGoneRecheck = 2 * time.Second

// DefaultQuotaResync is how often every TenantQuota is counted again when nothing else brought it back: usage
// and the ledger are re-derived from the agents and pods that exist even if an event was lost
// (--tenantquota-resync-interval).
const DefaultQuotaResync = 5 * time.Minute

// TenantQuotaReconciler counts what the AgentDeployments referencing a TenantQuota use, sets OverQuota, exports the
// usage ratio, and settles the reservation ledger that admission writes to the agents' actual demand.
type TenantQuotaReconciler struct {
	client.Client
	// APIReader confirms, uncached, an agent's state before a reservation is lowered or dropped.
	APIReader   client.Reader
	Recorder    recorder.EventRecorder
	GPUResource corev1.ResourceName
	// SettleGrace defaults to DefaultSettleGrace.
	SettleGrace time.Duration
	// UsageDelay defaults to DefaultUsageDelay.
	UsageDelay time.Duration
	// PodsGoneRecheck defaults to DefaultPodsGoneRecheck.
	PodsGoneRecheck time.Duration
	// ResyncInterval defaults to DefaultQuotaResync.
	ResyncInterval time.Duration
}

// +kubebuilder:rbac:groups=agentrax.io,resources=tenantquotas,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentrax.io,resources=tenantquotas/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentrax.io,resources=agentdeployments,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the TenantQuota, counts usage, settles the ledger and patches status once, only if changed.
func (r *TenantQuotaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	ctx, end := startReconcile(ctx, TenantQuotaControllerName, req.Namespace, req.Name)
	defer func() { end(err) }()

	tq := &agentraxv1alpha1.TenantQuota{}
	if err := r.Get(ctx, req.NamespacedName, tq); err != nil {
		if apierrors.IsNotFound(err) {
			quotaUsageRatio.DeleteLabelValues(req.Namespace)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ads := &agentraxv1alpha1.AgentDeploymentList{}
	if err := r.List(ctx, ads, client.InNamespace(tq.Namespace), client.MatchingFields{tenantRefField: tq.Name}); err != nil {
		return ctrl.Result{}, err
	}
	before := tq.DeepCopy()
	requeue, err := r.settleLedger(ctx, tq, ads.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	usage, perAgentMax := r.countUsage(tq, ads.Items)
	r.setConditions(tq, usage, perAgentMax)
	tq.Status.ObservedGeneration = tq.Generation
	quotaUsageRatio.WithLabelValues(tq.Namespace).Set(quota.UsageRatio(tq.Spec, usage))

	if !equality.Semantic.DeepEqual(before, tq) {
		// The ledger is shared with admission: write only on top of what was read.
		err := r.Status().Patch(ctx, tq, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			// Admission wrote the ledger since the cache was read; that write's event brings this quota back
			// (after the usage delay). The requeue is only a backstop.
			return ctrl.Result{RequeueAfter: r.usageDelay()}, nil
		}
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	// The periodic resync: counted again from what exists even if no event comes (one lost would otherwise
	// leave usage and the ledger stale until the next change).
	if resync := r.resyncInterval(); requeue == 0 || resync < requeue {
		requeue = resync
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *TenantQuotaReconciler) resyncInterval() time.Duration {
	if r.ResyncInterval > 0 {
		return r.ResyncInterval
	}
	return DefaultQuotaResync
}

// countUsage sets the used* counters from the live agents and the leaving ones whose charge the settled ledger
// still holds (their pods are not gone yet), so that usage and admission count the same agents.
func (r *TenantQuotaReconciler) countUsage(tq *agentraxv1alpha1.TenantQuota, ads []agentraxv1alpha1.AgentDeployment) (quota.Usage, int32) {
	var u quota.Usage
	var perAgentMax int32
	settled, _ := quota.ParseLedger(tq.Status.Ledger)
	for i := range ads {
		if ads[i].DeletionTimestamp != nil && quota.Find(settled, ads[i].Name) < 0 {
			continue
		}
		d := quota.DemandOf(&ads[i], r.GPUResource)
		if j := quota.Find(settled, ads[i].Name); j >= 0 && d.Canary {
			// The canary never grows past its reservation, which Settle holds within the quota.
			d = quota.Settle(d, settled[j], tq.Spec, quota.LedgerUsage(settled, ads[i].Name))
		}
		u = u.Add(d)
		perAgentMax = max(perAgentMax, ads[i].Spec.Replicas.Max)
	}
	tq.Status.UsedAgents, tq.Status.UsedGPUs, tq.Status.UsedTotalReplicas = u.Agents, u.GPUs, u.Replicas
	return u, perAgentMax
}

// settleLedger brings each reservation older than the grace period to its agent's actual demand, drops those of
// agents that are gone or leaving once their pods are gone too, and records agents that have none (created while
// the webhook was not called, or after the quota was re-created). Lowering or dropping is confirmed against the
// API server first. A leaving agent's charge outlives DELETE admission on purpose: while its deregistration is
// stalled, or the garbage collector has not yet removed its Deployment, its pods still hold their GPUs. It
// returns when to look again: for reservations still inside the grace period, or pods still to go.
func (r *TenantQuotaReconciler) settleLedger(ctx context.Context, tq *agentraxv1alpha1.TenantQuota, ads []agentraxv1alpha1.AgentDeployment) (time.Duration, error) {
	grace := r.SettleGrace
	if grace <= 0 {
		grace = DefaultSettleGrace
	}
	now := time.Now()
	cached := map[string]*agentraxv1alpha1.AgentDeployment{}
	for i := range ads {
		cached[ads[i].Name] = &ads[i]
	}
	var requeue time.Duration
	stored, err := quota.ParseLedger(tq.Status.Ledger)
	if err != nil {
		// Only a hand edit gets here (the schema refuses what admission could not have written). Rebuild from
		// the live agents below; reservations of objects still on their way to storage are lost, which the
		// event says.
		r.Recorder.Eventf(tq, nil, corev1.EventTypeWarning, agentraxv1alpha1.ReasonLedgerRebuilt, "SettleLedger",
			"status.ledger is unreadable (%v); rebuilt from the live AgentDeployments", err)
		stored = nil
	}
	ledger := append([]agentraxv1alpha1.Reservation(nil), stored...)
	// settled is what res is brought to for ad: its demand, with a canary charge that grew outside admission
	// (the stable scaled up) raised only into the room the other reservations leave.
	settled := func(ad *agentraxv1alpha1.AgentDeployment, res agentraxv1alpha1.Reservation) quota.Demand {
		return quota.Settle(quota.DemandOf(ad, r.GPUResource), res, tq.Spec, quota.LedgerUsage(ledger, res.Name))
	}
	soonest := func(wait time.Duration) {
		if requeue == 0 || wait < requeue {
			requeue = wait
		}
	}
	// release drops name's reservation unless the agent's pods still exist.
	release := func(name string) error {
		running, err := r.podsRemain(ctx, tq.Namespace, name)
		if err != nil {
			return err
		}
		if running {
			soonest(r.podsGoneRecheck())
			return nil
		}
		ledger = quota.Remove(ledger, name)
		return nil
	}
	for _, res := range stored {
		ad := cached[res.Name]
		if ad != nil && ad.DeletionTimestamp != nil {
			if err := release(res.Name); err != nil {
				return 0, err
			}
			continue
		}
		if ad != nil && matches(res, settled(ad, res)) {
			continue
		}
		if age := now.Sub(res.ReservedAt.Time); age < grace {
			soonest(grace - age + time.Second)
			continue
		}
		fresh := &agentraxv1alpha1.AgentDeployment{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: tq.Namespace, Name: res.Name}, fresh)
		switch {
		case apierrors.IsNotFound(err) || (err == nil && fresh.DeletionTimestamp != nil):
			if err := release(res.Name); err != nil {
				return 0, err
			}
		case err == nil && fresh.Spec.TenantRef != tq.Name:
			ledger = quota.Remove(ledger, res.Name)
		case err != nil:
			return 0, err
		default:
			d := settled(fresh, res)
			ledger = quota.Upsert(ledger, agentraxv1alpha1.Reservation{Name: res.Name, Replicas: d.Replicas, GPUs: d.GPUs, ReservedAt: res.ReservedAt})
		}
	}
	for i := range ads {
		ad := &ads[i]
		if ad.DeletionTimestamp != nil || quota.Find(ledger, ad.Name) >= 0 {
			continue
		}
		// The cache may lag a delete: an earlier pass may have dropped this agent's entry once the agent and its
		// pods were gone while the cache still lists it. Confirm with the API server before re-adding.
		fresh := &agentraxv1alpha1.AgentDeployment{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ad), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return 0, err
		}
		if fresh.DeletionTimestamp != nil {
			continue
		}
		d := quota.DemandOf(fresh, r.GPUResource)
		ledger = quota.Upsert(ledger, agentraxv1alpha1.Reservation{
			Name: ad.Name, Replicas: d.Replicas, GPUs: d.GPUs, ReservedAt: metav1.NewTime(now.Truncate(time.Second))})
	}
	tq.Status.Ledger = quota.FormatLedger(ledger)
	return requeue, nil
}

// podsRemain tells whether any pod of the agent name still exists in ns, terminating ones included (they hold
// their GPUs until the kubelet has stopped them). Asked of the API server: a lagging cache would release early.
func (r *TenantQuotaReconciler) podsRemain(ctx context.Context, ns, name string) (bool, error) {
	pods := &metav1.PartialObjectMetadataList{}
	pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	err := r.APIReader.List(ctx, pods, client.InNamespace(ns), client.Limit(1),
		client.MatchingLabels{agentraxv1alpha1.LabelName: name, agentraxv1alpha1.LabelAgent: "true"})
	if err != nil {
		return false, fmt.Errorf("listing the pods of leaving agent %s: %w", name, err)
	}
	return len(pods.Items) > 0, nil
}

func (r *TenantQuotaReconciler) podsGoneRecheck() time.Duration {
	if r.PodsGoneRecheck > 0 {
		return r.PodsGoneRecheck
	}
	return DefaultPodsGoneRecheck
}

func matches(r agentraxv1alpha1.Reservation, d quota.Demand) bool {
	return r.Replicas == d.Replicas && r.GPUs == d.GPUs
}

// setConditions sets Ready, LedgerReady (called only after the ledger was settled: it is written in the same
// patch) and OverQuota; OverQuota never deletes anything, it only explains why growth is refused.
func (r *TenantQuotaReconciler) setConditions(tq *agentraxv1alpha1.TenantQuota, u quota.Usage, perAgentMax int32) {
	meta.SetStatusCondition(&tq.Status.Conditions, metav1.Condition{
		Type: agentraxv1alpha1.ConditionLedgerReady, Status: metav1.ConditionTrue, Reason: agentraxv1alpha1.ReasonLedgerSettled,
		Message: "the admission ledger holds a reservation for every live AgentDeployment", ObservedGeneration: tq.Generation,
	})
	meta.SetStatusCondition(&tq.Status.Conditions, metav1.Condition{
		Type: agentraxv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentraxv1alpha1.ReasonUsageCounted,
		Message: "usage counted from the AgentDeployments referencing this quota", ObservedGeneration: tq.Generation,
	})
	over := metav1.Condition{
		Type: agentraxv1alpha1.ConditionOverQuota, Status: metav1.ConditionFalse, Reason: agentraxv1alpha1.ReasonWithinLimits,
		Message: "every agent fits the quota", ObservedGeneration: tq.Generation,
	}
	if exceeded := quota.Exceeded(tq.Spec, u, perAgentMax); len(exceeded) > 0 {
		over.Status, over.Reason = metav1.ConditionTrue, agentraxv1alpha1.ReasonExceeded
		over.Message = quota.Message(exceeded) + "; running agents are kept, growth is refused until usage fits"
		if !meta.IsStatusConditionTrue(tq.Status.Conditions, over.Type) {
			r.Recorder.Eventf(tq, nil, corev1.EventTypeWarning, over.Reason, "CountUsage", over.Message)
		}
	}
	meta.SetStatusCondition(&tq.Status.Conditions, over)
}

func (r *TenantQuotaReconciler) usageDelay() time.Duration {
	if r.UsageDelay > 0 {
		return r.UsageDelay
	}
	return DefaultUsageDelay
}

// SetupWithManager registers the controller. A new quota or a spec change is reconciled at once; AgentDeployment
// events and status-only quota updates (the admission ledger, this controller's own writes) enqueue the quota
// after the usage delay, so that bursts coalesce.
func (r *TenantQuotaReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts kube.ControllerOptions) error {
	if err := kube.IndexField(ctx, mgr, &agentraxv1alpha1.AgentDeployment{}, tenantRefField, tenantRefOf); err != nil {
		return err
	}
	quotaOf := func(o client.Object) types.NamespacedName {
		if ad, ok := o.(*agentraxv1alpha1.AgentDeployment); ok {
			return types.NamespacedName{Namespace: ad.Namespace, Name: ad.Spec.TenantRef}
		}
		return client.ObjectKeyFromObject(o)
	}
	statusOnly := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return e.ObjectOld.GetGeneration() == e.ObjectNew.GetGeneration() },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(TenantQuotaControllerName).
		For(&agentraxv1alpha1.TenantQuota{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&agentraxv1alpha1.TenantQuota{}, delayedEnqueue(quotaOf, r.usageDelay()), builder.WithPredicates(statusOnly)).
		Watches(&agentraxv1alpha1.AgentDeployment{}, delayedEnqueue(quotaOf, r.usageDelay())).
		WithOptions(opts.Options()).
		Complete(telemetry.TracedReconciler(TenantQuotaControllerName, r))
}

// delayedEnqueue enqueues key(object) delay after every event; the queue keeps the earliest of several pending
// times for one key, so events within the delay coalesce into one reconcile.
func delayedEnqueue(key func(client.Object) types.NamespacedName, delay time.Duration) handler.EventHandler {
	add := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		q.AddAfter(reconcile.Request{NamespacedName: key(o)}, delay)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(e.Object, q)
		},
	}
}
