package fleet

import (
	"context"
	"fmt"
	"maps"
	"time"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/discovery"
	"github.com/quartet-dev/quartet-operator/internal/fleet/selector"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// CollectorDiscoveryControllerName is the controller name, unique across groups.
const CollectorDiscoveryControllerName = "fleet-collectordiscovery"

// CollectorDiscoveryReconciler creates Collector CRs for the Fleet collectors each discovery selects. The
// Collector controller does everything else with them, so it must run too.
type CollectorDiscoveryReconciler struct {
	client.Client
	// APIReader reads a CR the cache has not seen yet, when a create finds it already there.
	APIReader client.Reader
	Poller
	Fleet Clients
	// MaxConcurrentReconciles is --controller-discovery-max-concurrent.
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=collectordiscoveries,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=collectordiscoveries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=collectors,verbs=get;list;watch;create;update;patch;delete

// Reconcile polls Fleet when the discovery is due (or its spec changed) and patches status once. There is no
// finalizer: deleting a discovery orphans the Collectors it created.
func (r *CollectorDiscoveryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	d := &fleetv1alpha1.CollectorDiscovery{}
	if err := r.Get(ctx, req.NamespacedName, d); err != nil {
		if apierrors.IsNotFound(err) {
			discoveryResultSize.DeleteLabelValues(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !d.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	interval := pollInterval(d.Spec.PollInterval)
	now := r.now()
	if wait := untilDue(&d.Status.DiscoveryStatus, d.Generation, interval, now); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	before := d.DeepCopy()
	res, err := r.poll(ctx, d, metav1.NewTime(now), interval)
	if perr := kube.PatchStatusIfChanged(ctx, r.Client, before, d); perr != nil && err == nil {
		err = perr
	}
	return res, err
}

// list asks Fleet for the selected collectors. Only matchers go to Fleet; with collectorIDs in the selector
// (ORed with the matchers) every collector is listed and the whole selector is evaluated here, and that unfiltered
// list is returned too (nil when Fleet filtered).
func (r *CollectorDiscoveryReconciler) list(ctx context.Context, d *fleetv1alpha1.CollectorDiscovery) (selected, all []*collectorv1.Collector, err error) {
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		return nil, nil, err
	}
	sel := d.Spec.Selector
	if len(sel.CollectorIDs) == 0 {
		cols, err := fc.ListCollectors(ctx, sel.Matchers)
		return cols, nil, err
	}
	compiled, err := selector.Compile(sel)
	if err != nil {
		return nil, nil, err
	}
	all, err = fc.ListCollectors(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range all {
		attrs := maps.Clone(c.GetLocalAttributes())
		if attrs == nil {
			attrs = map[string]string{}
		}
		maps.Copy(attrs, c.GetRemoteAttributes())
		attrs[selector.CollectorIDKey] = c.GetId()
		if compiled.Matches(c.GetId(), attrs) {
			selected = append(selected, c)
		}
	}
	return selected, all, nil
}

// listAll is the unfiltered list (inactive collectors included) that tells "gone from Fleet" from "no longer
// selected". It is only asked for when some CR left the selection, so a steady poll stays one matcher query.
func (r *CollectorDiscoveryReconciler) listAll(ctx context.Context) ([]*collectorv1.Collector, error) {
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		return nil, err
	}
	return fc.ListCollectors(ctx, nil)
}

// poll is the phases of one poll: list, plan, create, refresh, retire, report.
func (r *CollectorDiscoveryReconciler) poll(ctx context.Context, d *fleetv1alpha1.CollectorDiscovery, now metav1.Time, interval time.Duration) (ctrl.Result, error) {
	st := &d.Status.DiscoveryStatus
	st.LastSyncTime, st.ObservedGeneration = &now, d.Generation
	cols, all, err := r.list(ctx, d)
	if err != nil {
		return r.pollFailed(d, st, "CollectorDiscovery", r.Fleet, err), nil
	}
	listed := len(cols)
	if all != nil {
		listed = len(all)
	}
	discoveryResultSize.WithLabelValues(d.Namespace, d.Name).Set(float64(listed))
	var remotes []discovery.Remote
	for _, c := range cols {
		if c.GetMarkedInactiveAt() != nil && !d.Spec.IncludeInactive {
			continue
		}
		remotes = append(remotes, discovery.Remote{ID: c.GetId(), CRName: discovery.CollectorCRName(c.GetId())})
	}
	self := d.Namespace + "/" + d.Name
	target := targetNamespace(d, d.Spec.TargetNamespace)
	owned := &fleetv1alpha1.CollectorList{}
	if err := r.List(ctx, owned, client.InNamespace(target), client.MatchingFields{collectorDiscoveredByField: self}); err != nil {
		// Ready must not stay True from the previous poll.
		return r.pollFailed(d, st, "CollectorDiscovery", r.Fleet, err), err
	}
	crs := map[string]*fleetv1alpha1.Collector{}
	var existing []discovery.Existing
	for i := range owned.Items {
		c := &owned.Items[i]
		if !c.DeletionTimestamp.IsZero() {
			continue // already on its way out; not counted, not planned
		}
		crs[c.Name] = c
		existing = append(existing, existingCollector(c))
	}
	plan := discovery.Build(self, remotes, existing, func(name string) (discovery.Existing, bool) {
		c := &fleetv1alpha1.Collector{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: target, Name: name}, c); err != nil {
			return discovery.Existing{}, false
		}
		return existingCollector(c), true
	})
	if len(plan.Gone) > 0 && all == nil {
		if all, err = r.listAll(ctx); err != nil {
			return r.pollFailed(d, st, "CollectorDiscovery", r.Fleet, err), nil
		}
	}
	total, present := len(cols), map[string]bool{}
	if all != nil {
		total = len(all)
		for _, c := range all {
			present[c.GetId()] = true
		}
	}
	retiring := discovery.Retire(plan.Gone, total, len(existing), func(id string) bool { return present[id] },
		d.Spec.Policy.OnCollectorRemoved == fleetv1alpha1.RemovalDelete)
	if retiring.EmptyResult {
		r.pollEmptyResult(d, st, "CollectorDiscovery", len(existing))
		return ctrl.Result{RequeueAfter: interval}, nil
	}

	created, managed := 0, len(existing)
	var failures []string
	for _, rem := range plan.Create {
		c := newCollector(d, target, rem)
		live := &fleetv1alpha1.Collector{}
		switch exists, err := createDiscovered(ctx, r.Client, r.APIReader, c, live); {
		case err == nil && !exists:
			created++
			managed++
		case err == nil:
			// The cache had not seen it yet: decided from the API server's copy.
			if cf := discovery.Classify(self, rem, existingCollector(live)); cf != nil {
				plan.Conflicts = append(plan.Conflicts, *cf)
			} else {
				managed++
			}
		case exists:
			failures = append(failures, failure("Collector", c, err))
		default:
			// Listed as a conflict (the object got no CR) and as a failure: Ready must not stay True.
			plan.Conflicts = append(plan.Conflicts, discovery.Conflict{ID: rem.ID, CRName: rem.CRName,
				Reason: fleetv1alpha1.ConflictCreateFailed, Message: err.Error()})
			failures = append(failures, failure("Collector", c, err))
		}
	}
	for _, pair := range plan.Refresh {
		c := crs[pair.CR.Name]
		if c.DeletionTimestamp.IsZero() && setAnnotation(c, fleetv1alpha1.AnnotationDiscoveryStale, "") {
			if err := r.Update(ctx, c); client.IgnoreNotFound(err) != nil {
				failures = append(failures, failure("Collector", c, err))
			}
		}
	}
	pruned, stale, retireFailures := r.retire(ctx, d, retiring, crs)
	failures = append(failures, retireFailures...)
	managed -= pruned
	previous := map[string]bool{}
	for _, c := range d.Status.Conflicts {
		previous[c.CollectorID] = true
	}
	d.Status.CollectorsObserved, d.Status.CollectorsManaged, d.Status.StaleCollectors = int32(len(remotes)), int32(managed), int32(stale)
	summary := fmt.Sprintf("%d Fleet collector(s) selected, %d Collector(s) in %s (%d stale), %d conflict(s)",
		len(remotes), managed, target, stale, len(plan.Conflicts))
	conflicts, err := r.report(d, st, pollReport{kind: "CollectorDiscovery", now: now, previous: previous, conflicts: plan.Conflicts,
		failures: failures, created: created, pruned: pruned, summary: summary})
	d.Status.Conflicts = nil
	for _, c := range conflicts {
		d.Status.Conflicts = append(d.Status.Conflicts, fleetv1alpha1.CollectorDiscoveryConflict{
			CollectorID: c.ID, CRName: c.CRName, Reason: c.Reason, Message: c.Message})
	}
	return ctrl.Result{RequeueAfter: interval}, err
}

func existingCollector(c *fleetv1alpha1.Collector) discovery.Existing {
	a := c.GetAnnotations()
	return discovery.Existing{Name: c.Name, DiscoveredBy: a[fleetv1alpha1.AnnotationDiscoveredBy],
		ID: a[fleetv1alpha1.AnnotationFleetCollectorID], Stale: a[fleetv1alpha1.AnnotationDiscoveryStale] == "true"}
}

// newCollector is the CR for a discovered collector: only its ID; attributes come from policies, syncs or a
// later edit.
func newCollector(d *fleetv1alpha1.CollectorDiscovery, ns string, rem discovery.Remote) *fleetv1alpha1.Collector {
	return &fleetv1alpha1.Collector{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: rem.CRName,
			Labels: map[string]string{
				fleetv1alpha1.LabelDiscoveryName:      d.Name,
				fleetv1alpha1.LabelDiscoveryNamespace: d.Namespace,
			},
			Annotations: map[string]string{
				fleetv1alpha1.AnnotationDiscoveredBy:     d.Namespace + "/" + d.Name,
				fleetv1alpha1.AnnotationFleetCollectorID: rem.ID,
			},
		},
		Spec: fleetv1alpha1.CollectorSpec{ID: rem.ID},
	}
}

// retire deletes the CRs whose collector is gone from Fleet (under Delete) and marks the others stale: deleting
// the CR of a collector that still exists would strip the remote attributes it wrote from the live collector. It
// returns how many were deleted, how many are stale, and the CRs it could not write.
func (r *CollectorDiscoveryReconciler) retire(ctx context.Context, d *fleetv1alpha1.CollectorDiscovery, retiring discovery.Retirement,
	crs map[string]*fleetv1alpha1.Collector) (pruned, stale int, failures []string) {
	for _, e := range retiring.Delete {
		if err := r.Delete(ctx, crs[e.Name]); client.IgnoreNotFound(err) != nil {
			failures = append(failures, failure("Collector", crs[e.Name], err))
			continue
		}
		pruned++
	}
	for _, e := range retiring.Stale {
		c := crs[e.Name]
		if setAnnotation(c, fleetv1alpha1.AnnotationDiscoveryStale, "true") {
			r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, "Stale", "Poll", "Collector %s/%s: Fleet collector %s is no longer selected", c.Namespace, c.Name, e.ID)
			if err := r.Update(ctx, c); client.IgnoreNotFound(err) != nil {
				failures = append(failures, failure("Collector", c, err))
			}
		}
	}
	return pruned, len(retiring.Stale), failures
}

// SetupWithManager registers the controller: spec changes wake it, the poll interval requeues it.
func (r *CollectorDiscoveryReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	initSyncOutcomes("CollectorDiscovery")
	if err := indexDiscovered(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(CollectorDiscoveryControllerName).
		For(&fleetv1alpha1.CollectorDiscovery{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(kube.ControllerOptions{MaxConcurrentReconciles: r.MaxConcurrentReconciles}.Options()).
		Complete(telemetry.TracedReconciler(CollectorDiscoveryControllerName, r))
}
