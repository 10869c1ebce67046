package fleet

import (
	"context"
	"fmt"
	"maps"
	"time"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/attributes"
	"github.com/quartet-dev/quartet-operator/internal/fleet/claims"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/selector"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// CollectorControllerName is the controller name, unique across groups.
const CollectorControllerName = "fleet-collector"

// Requeue intervals of the Collector controller.
const (
	// CollectorResync re-reads a synced collector, catching changes made outside the operator.
	CollectorResync = 30 * time.Minute
	// NotRegisteredRequeue polls for a collector that has not registered yet.
	NotRegisteredRequeue = 30 * time.Second
)

// CollectorReconciler applies a Collector CR's name, enabled flag and remote attributes to the Fleet collector.
type CollectorReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	Fleet    Clients
}

// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=collectors,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=collectors/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=collectors/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=remoteattributepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=externalattributesyncs,verbs=get;list;watch

// Reconcile reads the collector from Fleet, pushes the attribute diff and patches status once.
func (r *CollectorReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &fleetv1alpha1.Collector{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !c.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, c)
	}
	if controllerutil.AddFinalizer(c, fleetv1alpha1.CollectorFinalizer) {
		if err := r.Update(ctx, c); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := c.DeepCopy()
	var res ctrl.Result
	holder, err := r.idHolder(ctx, c)
	switch {
	case err != nil:
	case holder != claims.Key(c):
		res = r.conflicted(c, holder)
	default:
		setCondition(c, fleetv1alpha1.ConditionConflicted, metav1.ConditionFalse, fleetv1alpha1.ReasonIDHeld,
			fmt.Sprintf("this Collector holds collector ID %q", c.Spec.ID))
		res, err = r.sync(ctx, c)
	}
	if perr := kube.PatchStatusIfChanged(ctx, r.Client, before, c); perr != nil && err == nil {
		err = perr
	}
	return res, err
}

// idHolder is the Collector (namespace/name) that holds c's collector ID cluster-wide, found through the spec.id
// index.
func (r *CollectorReconciler) idHolder(ctx context.Context, c *fleetv1alpha1.Collector) (string, error) {
	list := &fleetv1alpha1.CollectorList{}
	if err := r.List(ctx, list, client.MatchingFields{collectorIDField: c.Spec.ID}); err != nil {
		return "", err
	}
	if h := claims.Holder(list.Items); h != nil {
		return claims.Key(h), nil
	}
	return claims.Key(c), nil
}

// conflicted records that another Collector holds the ID (both were admitted while the webhook was not
// running): no Fleet call, and a look again later, when the holder may be gone.
func (r *CollectorReconciler) conflicted(c *fleetv1alpha1.Collector, holder string) ctrl.Result {
	msg := fmt.Sprintf("collector ID %q is held by Collector %s; this Collector makes no Fleet call until that one is deleted", c.Spec.ID, holder)
	if !meta.IsStatusConditionTrue(c.Status.Conditions, fleetv1alpha1.ConditionConflicted) {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, fleetv1alpha1.ConditionConflicted, "Sync", "%s", msg)
	}
	recordSync("Collector", fleetv1alpha1.ReasonIDClaimed)
	c.Status.ObservedGeneration = c.Generation
	setCondition(c, fleetv1alpha1.ConditionConflicted, metav1.ConditionTrue, fleetv1alpha1.ReasonIDClaimed, msg)
	setCondition(c, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonIDClaimed, msg)
	setCondition(c, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonIDClaimed, msg)
	return ctrl.Result{RequeueAfter: NotRegisteredRequeue}
}

// claims are every attribute claim on this collector: its own spec, the RemoteAttributePolicies of its namespace
// whose selector matches it, and the ExternalAttributeSyncs of its namespace that own keys for its ID (found
// through the ownedKeys index). attributes.Resolve orders them.
func (r *CollectorReconciler) claims(ctx context.Context, c *fleetv1alpha1.Collector) ([]attributes.Claim, error) {
	out := []attributes.Claim{{Kind: fleetv1alpha1.OwnerCollector, Name: c.Namespace + "/" + c.Name, Attributes: c.Spec.RemoteAttributes}}
	policies := &fleetv1alpha1.RemoteAttributePolicyList{}
	if err := r.List(ctx, policies, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	for i := range policies.Items {
		p := &policies.Items[i]
		sel, err := selector.Compile(p.Spec.Selector)
		if err != nil || !p.DeletionTimestamp.IsZero() || !sel.MatchesCollector(c) {
			continue // a selector that does not compile matches nothing (admission refuses it anyway)
		}
		out = append(out, attributes.Claim{Kind: fleetv1alpha1.OwnerRemoteAttributePolicy, Name: p.Namespace + "/" + p.Name,
			Priority: p.Spec.Priority, Attributes: p.Spec.Attributes})
	}
	syncs := &fleetv1alpha1.ExternalAttributeSyncList{}
	if err := r.List(ctx, syncs, client.InNamespace(c.Namespace), client.MatchingFields{ownedCollectorField: c.Spec.ID}); err != nil {
		return nil, err
	}
	for i := range syncs.Items {
		s := &syncs.Items[i]
		if !s.DeletionTimestamp.IsZero() {
			continue
		}
		for _, o := range s.Status.OwnedKeys {
			if o.CollectorID == c.Spec.ID {
				out = append(out, attributes.Claim{Kind: fleetv1alpha1.OwnerExternalAttributeSync, Name: s.Namespace + "/" + s.Name,
					Truncated: meta.IsStatusConditionTrue(s.Status.Conditions, fleetv1alpha1.ConditionTruncated), Attributes: o.Attributes})
			}
		}
	}
	return out, nil
}

func (r *CollectorReconciler) sync(ctx context.Context, c *fleetv1alpha1.Collector) (ctrl.Result, error) {
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		return r.failed(c, "Sync", err)
	}
	remote, err := fc.GetCollector(ctx, c.Spec.ID)
	switch {
	case fleetclient.IsNotFound(err):
		c.Status.Registered = false
		c.Status.ObservedGeneration = c.Generation
		msg := fmt.Sprintf("collector %q has not registered with Fleet Management; checking again in %s", c.Spec.ID, NotRegisteredRequeue)
		if !meta.IsStatusConditionPresentAndEqual(c.Status.Conditions, fleetv1alpha1.ConditionReady, metav1.ConditionFalse) ||
			meta.FindStatusCondition(c.Status.Conditions, fleetv1alpha1.ConditionReady).Reason != fleetv1alpha1.ReasonNotRegistered {
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonNotRegistered, "Get", "%s", msg)
		}
		recordSync("Collector", fleetv1alpha1.ReasonNotRegistered)
		setCondition(c, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonNotRegistered, msg)
		setCondition(c, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonNotRegistered, msg)
		return ctrl.Result{RequeueAfter: NotRegisteredRequeue}, nil
	case err != nil:
		return r.failed(c, "Get", err)
	}
	// Policies select on the attributes the collector reports now, not those of the last reconcile.
	c.Status.LocalAttributes = remote.GetLocalAttributes()
	claims, err := r.claims(ctx, c)
	if err != nil {
		return ctrl.Result{}, err
	}
	effective, owners := attributes.Resolve(claims)
	ops := attributes.Diff(effective, c.Status.AttributeOwners, remote.GetRemoteAttributes())
	wantName := c.Spec.Name != "" && c.Spec.Name != remote.GetName()
	wantEnabled := c.Spec.Enabled != nil && (remote.Enabled == nil || *c.Spec.Enabled != remote.GetEnabled())
	switch {
	case wantName || wantEnabled:
		// Name and enabled are only writable through UpdateCollector, which replaces the collector: send it whole,
		// with the attribute diff already applied, in one call.
		update := proto.Clone(remote).(*collectorv1.Collector)
		if wantName {
			update.Name = c.Spec.Name
		}
		if wantEnabled {
			update.Enabled = proto.Bool(*c.Spec.Enabled)
		}
		update.RemoteAttributes = applyOps(remote.GetRemoteAttributes(), effective, ops)
		if remote, err = fc.UpdateCollector(ctx, update); err != nil {
			return r.failed(c, "Update", err)
		}
	case len(ops) > 0:
		if err := fc.BulkUpdateCollectors(ctx, []string{c.Spec.ID}, ops); err != nil {
			return r.failed(c, "BulkUpdate", err)
		}
		remote.RemoteAttributes = applyOps(remote.GetRemoteAttributes(), effective, ops)
	}
	if len(ops) > 0 {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "AttributesUpdated", "BulkUpdate",
			"Applied %d remote attribute operation(s) to collector %q", len(ops), c.Spec.ID)
	}
	applyCollectorStatus(&c.Status, remote)
	c.Status.EffectiveRemoteAttributes, c.Status.AttributeOwners = effective, owners
	c.Status.ObservedGeneration = c.Generation
	msg := fmt.Sprintf("collector %q is in sync", c.Spec.ID)
	if !meta.IsStatusConditionTrue(c.Status.Conditions, fleetv1alpha1.ConditionReady) {
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "Synced", "Sync", "%s", msg)
	}
	recordSync("Collector", fleetv1alpha1.ReasonSynced)
	setCondition(c, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, msg)
	setCondition(c, fleetv1alpha1.ConditionSynced, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, msg)
	return ctrl.Result{RequeueAfter: CollectorResync}, nil
}

// applyOps is the remote attribute map after the diff's operations.
func applyOps(remote, desired map[string]string, ops []*collectorv1.Operation) map[string]string {
	out := maps.Clone(remote)
	if out == nil {
		out = map[string]string{}
	}
	for _, op := range ops {
		key, err := attributes.ParsePath(op.GetPath())
		if err != nil {
			continue
		}
		if op.GetOp() == collectorv1.Operation_REMOVE {
			delete(out, key)
		} else {
			out[key] = desired[key]
		}
	}
	return out
}

func applyCollectorStatus(st *fleetv1alpha1.CollectorStatus, col *collectorv1.Collector) {
	st.Registered = true
	st.Name = col.GetName()
	st.Enabled = nil
	if col.Enabled != nil {
		st.Enabled = proto.Bool(col.GetEnabled())
	}
	switch col.GetCollectorType() {
	case collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY:
		st.CollectorType = fleetv1alpha1.CollectorTypeAlloy
	case collectorv1.CollectorType_COLLECTOR_TYPE_OTEL:
		st.CollectorType = fleetv1alpha1.CollectorTypeOTel
	default:
		st.CollectorType = fleetv1alpha1.CollectorTypeUnspecified
	}
	st.CreatedAt = metaTime(col.GetCreatedAt())
	st.UpdatedAt = metaTime(col.GetUpdatedAt())
	st.MarkedInactiveAt = metaTime(col.GetMarkedInactiveAt())
	st.LastPing = st.UpdatedAt
	st.LocalAttributes = col.GetLocalAttributes()
}

func metaTime(ts *timestamppb.Timestamp) *metav1.Time {
	if ts == nil {
		return nil
	}
	t := metav1.NewTime(ts.AsTime())
	return &t
}

func (r *CollectorReconciler) failed(c *fleetv1alpha1.Collector, action string, err error) (ctrl.Result, error) {
	if fleetclient.IsRateLimited(err) {
		recordSync("Collector", fleetv1alpha1.ReasonRateLimited)
		setCondition(c, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonRateLimited,
			fmt.Sprintf("Fleet Management answered 429; retrying in %s", rateLimitWait(err)))
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, "RateLimited", action, "Fleet Management rate limit; retrying in %s", rateLimitWait(err))
		return ctrl.Result{RequeueAfter: rateLimitWait(err)}, nil
	}
	reason := fleetv1alpha1.ReasonSyncFailed
	if fleetclient.IsInvalid(err) {
		reason = fleetv1alpha1.ReasonValidationError
	}
	if fleetclient.IsUnauthenticated(err) {
		r.Fleet.Invalidate()
	}
	recordSync("Collector", reason)
	setCondition(c, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
	setCondition(c, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, reason, err.Error())
	r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, "SyncFailed", action, "%v", err)
	if reason == fleetv1alpha1.ReasonValidationError {
		c.Status.ObservedGeneration = c.Generation
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// finalize removes the remote attributes this Collector owns (and only those), then the finalizer. A collector
// Fleet no longer knows needs no cleanup.
func (r *CollectorReconciler) finalize(ctx context.Context, c *fleetv1alpha1.Collector) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(c, fleetv1alpha1.CollectorFinalizer) {
		return ctrl.Result{}, nil
	}
	if len(c.Status.AttributeOwners) > 0 {
		err := r.removeOwned(ctx, c)
		switch {
		case err == nil:
			recordSync("Collector", "Deleted")
			r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "Deleted", "Delete", "Removed the remote attributes owned by this Collector")
		case fleetclient.IsRateLimited(err):
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, "RateLimited", "Delete", "Fleet Management rate limit; retrying in %s", rateLimitWait(err))
			return ctrl.Result{RequeueAfter: rateLimitWait(err)}, nil
		default:
			before := c.DeepCopy()
			recordSync("Collector", fleetv1alpha1.ReasonDeleteFailed)
			setCondition(c, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonDeleteFailed, err.Error())
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, "DeleteFailed", "Delete", "Removing owned remote attributes: %v", err)
			// The error sends the reconcile into backoff: the finalizer stays and the removal is retried.
			if perr := kube.PatchStatusIfChanged(ctx, r.Client, before, c); perr != nil {
				return ctrl.Result{}, perr
			}
			return ctrl.Result{}, err
		}
	}
	controllerutil.RemoveFinalizer(c, fleetv1alpha1.CollectorFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Update(ctx, c))
}

func (r *CollectorReconciler) removeOwned(ctx context.Context, c *fleetv1alpha1.Collector) error {
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		return err
	}
	remote, err := fc.GetCollector(ctx, c.Spec.ID)
	if fleetclient.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	successor, err := r.successorKeys(ctx, c)
	if err != nil {
		return err
	}
	owned := attributes.HandedOff(c.Status.AttributeOwners, successor, remote.GetRemoteAttributes())
	ops := attributes.RemoveOwned(owned, remote.GetRemoteAttributes())
	if len(ops) == 0 {
		return nil
	}
	err = fc.BulkUpdateCollectors(ctx, []string{c.Spec.ID}, ops)
	if fleetclient.IsNotFound(err) {
		return nil
	}
	return err
}

// successorKeys are the attribute keys the other live Collectors of c's collector ID own (the holder after a
// hand-off): a deleting Collector's finalizer never removes them.
func (r *CollectorReconciler) successorKeys(ctx context.Context, c *fleetv1alpha1.Collector) (map[string]bool, error) {
	list := &fleetv1alpha1.CollectorList{}
	if err := r.List(ctx, list, client.MatchingFields{claims.IDField: c.Spec.ID}); err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for i := range list.Items {
		o := &list.Items[i]
		if o.DeletionTimestamp.IsZero() && (o.Namespace != c.Namespace || o.Name != c.Name) {
			for _, a := range o.Status.AttributeOwners {
				keys[a.Key] = true
			}
		}
	}
	return keys, nil
}

// SetupWithManager registers the controller: one reconcile at a time (the Fleet rate budget is shared), spec
// changes and deletions (its own status writes do not wake it), policy changes in the namespace, sync claims
// that add or drop the collector, and a 30 minute backstop requeue.
func (r *CollectorReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	initSyncOutcomes("Collector")
	if err := indexCollectors(ctx, mgr); err != nil {
		return err
	}
	if err := indexSyncs(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(CollectorControllerName).
		For(&fleetv1alpha1.Collector{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				// Local attributes are inputs of policy selectors: a change (first seen after registration) must
				// re-evaluate the policies.
				o, n := e.ObjectOld.(*fleetv1alpha1.Collector), e.ObjectNew.(*fleetv1alpha1.Collector)
				return !n.DeletionTimestamp.IsZero() || !maps.Equal(o.Status.LocalAttributes, n.Status.LocalAttributes)
			}}))).
		Watches(&fleetv1alpha1.RemoteAttributePolicy{}, handler.EnqueueRequestsFromMapFunc(r.collectorsOfPolicy),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleetv1alpha1.ExternalAttributeSync{}, handler.EnqueueRequestsFromMapFunc(r.collectorsOfSync),
			builder.WithPredicates(ownedKeysChanged)).
		WithOptions(kube.ControllerOptions{MaxConcurrentReconciles: 1}.Options()).
		Complete(telemetry.TracedReconciler(CollectorControllerName, r))
}

// collectorsOfPolicy are the Collectors a policy matches now or set attributes on before (a selector change
// must reach the collectors it drops).
func (r *CollectorReconciler) collectorsOfPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	p := o.(*fleetv1alpha1.RemoteAttributePolicy)
	ids, _ := MatchingCollectorIDs(ctx, r.Client, p)
	return collectorRequests(ctx, r.Client, p.Namespace, ids, ownerKey(fleetv1alpha1.OwnerRemoteAttributePolicy, p.Namespace, p.Name))
}

// collectorsOfSync are the Collectors a sync claims now or owned attributes of before.
func (r *CollectorReconciler) collectorsOfSync(ctx context.Context, o client.Object) []reconcile.Request {
	s := o.(*fleetv1alpha1.ExternalAttributeSync)
	ids := make([]string, 0, len(s.Status.OwnedKeys))
	for _, k := range s.Status.OwnedKeys {
		ids = append(ids, k.CollectorID)
	}
	return collectorRequests(ctx, r.Client, s.Namespace, ids, ownerKey(fleetv1alpha1.OwnerExternalAttributeSync, s.Namespace, s.Name))
}

// ownedKeysChanged passes sync creations and deletions, and updates that change the claim or its Truncated
// condition; a sync's other status writes (times, counters) do not concern collectors.
var ownedKeysChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*fleetv1alpha1.ExternalAttributeSync), e.ObjectNew.(*fleetv1alpha1.ExternalAttributeSync)
	return !equality.Semantic.DeepEqual(o.Status.OwnedKeys, n.Status.OwnedKeys) ||
		meta.IsStatusConditionTrue(o.Status.Conditions, fleetv1alpha1.ConditionTruncated) != meta.IsStatusConditionTrue(n.Status.Conditions, fleetv1alpha1.ConditionTruncated) ||
		!n.DeletionTimestamp.IsZero()
}}
