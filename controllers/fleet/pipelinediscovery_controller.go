package fleet

import (
	"context"
	"fmt"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/discovery"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// PipelineDiscoveryControllerName is the controller name, unique across groups.
const PipelineDiscoveryControllerName = "fleet-pipelinediscovery"

// PipelineDiscoveryReconciler imports Fleet pipelines as Pipeline CRs on each discovery's poll interval.
type PipelineDiscoveryReconciler struct {
	client.Client
	// APIReader reads a CR the cache has not seen yet, when a create finds it already there.
	APIReader client.Reader
	Poller
	Fleet Clients
	// MaxConcurrentReconciles is --controller-discovery-max-concurrent.
	MaxConcurrentReconciles int
	// Cluster identifies this cluster in pipelines' ownership markers (the Pipeline controller's Cluster).
	Cluster string
}

// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=pipelinediscoveries,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=pipelinediscoveries/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=pipelines,verbs=get;list;watch;create;update;patch;delete

// Reconcile polls Fleet when the discovery is due (or its spec changed) and patches status once. There is no
// finalizer: deleting a discovery orphans the Pipelines it created.
func (r *PipelineDiscoveryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	d := &fleetv1alpha1.PipelineDiscovery{}
	if err := r.Get(ctx, req.NamespacedName, d); err != nil {
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

// poll is the phases of one poll: list, plan, create, refresh, retire, report.
func (r *PipelineDiscoveryReconciler) poll(ctx context.Context, d *fleetv1alpha1.PipelineDiscovery, now metav1.Time, interval time.Duration) (ctrl.Result, error) {
	st := &d.Status.DiscoveryStatus
	st.LastSyncTime, st.ObservedGeneration = &now, d.Generation
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		return r.pollFailed(d, st, "PipelineDiscovery", r.Fleet, err), nil
	}
	all, err := fc.ListPipelines(ctx, &pipelinev1.ListPipelinesRequest{})
	if err != nil {
		return r.pollFailed(d, st, "PipelineDiscovery", r.Fleet, err), nil
	}
	self := d.Namespace + "/" + d.Name
	target := targetNamespace(d, d.Spec.TargetNamespace)
	owned := &fleetv1alpha1.PipelineList{}
	if err := r.List(ctx, owned, client.InNamespace(target), client.MatchingFields{pipelineDiscoveredByField: self}); err != nil {
		// Ready must not stay True from the previous poll.
		return r.pollFailed(d, st, "PipelineDiscovery", r.Fleet, err), err
	}
	crs := map[string]*fleetv1alpha1.Pipeline{}
	var existing []discovery.Existing
	for i := range owned.Items {
		p := &owned.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue // already on its way out; not counted, not planned
		}
		crs[p.Name] = p
		existing = append(existing, existingPipeline(p))
	}
	// The whole list is read and filtered here, so that "gone from Fleet" and "no longer selected" can be told
	// apart: only the first may delete a CR (deleting an adopted CR deletes its Fleet pipeline).
	present := map[string]bool{}
	byID := map[string]*pipelinev1.Pipeline{}
	var remotes []discovery.Remote
	for _, p := range all {
		present[p.GetId()] = true
		if !pipelines.MatchesSelector(p, d.Spec.Selector) || r.managedHere(p, target, crs) {
			continue
		}
		byID[p.GetId()] = p
		remotes = append(remotes, discovery.Remote{ID: p.GetId(), CRName: discovery.PipelineCRName(p.GetName()), Invalid: pipelines.Importable(p)})
	}
	plan := discovery.Build(self, remotes, existing, func(name string) (discovery.Existing, bool) {
		p := &fleetv1alpha1.Pipeline{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: target, Name: name}, p); err != nil {
			return discovery.Existing{}, false
		}
		return existingPipeline(p), true
	})
	retiring := discovery.Retire(plan.Gone, len(all), len(existing), func(id string) bool { return present[id] },
		d.Spec.Policy.OnPipelineRemoved == fleetv1alpha1.RemovalDelete)
	if retiring.EmptyResult {
		r.pollEmptyResult(d, st, "PipelineDiscovery", len(existing))
		return ctrl.Result{RequeueAfter: interval}, nil
	}

	created, managed := 0, len(existing)
	var failures []string
	for _, rem := range plan.Create {
		p := r.newPipeline(d, target, rem.CRName, byID[rem.ID])
		live := &fleetv1alpha1.Pipeline{}
		switch exists, err := createDiscovered(ctx, r.Client, r.APIReader, p, live); {
		case err == nil && !exists:
			created++
			managed++
			// A read-only CR is mirrored by its discovery; the Pipeline controller never looks it up.
			if p.Annotations[fleetv1alpha1.AnnotationImportMode] == fleetv1alpha1.ImportModeReadOnly {
				if err := r.mirror(ctx, p, byID[rem.ID]); err != nil {
					failures = append(failures, failure("Pipeline", p, err))
				}
			}
		case err == nil:
			// The cache had not seen it yet: decided from the API server's copy.
			if c := discovery.Classify(self, rem, existingPipeline(live)); c != nil {
				plan.Conflicts = append(plan.Conflicts, *c)
			} else {
				managed++
			}
		case exists:
			failures = append(failures, failure("Pipeline", p, err))
		default:
			// Listed as a conflict (the object got no CR) and as a failure: Ready must not stay True.
			plan.Conflicts = append(plan.Conflicts, discovery.Conflict{ID: rem.ID, CRName: rem.CRName,
				Reason: fleetv1alpha1.ConflictCreateFailed, Message: err.Error()})
			failures = append(failures, failure("Pipeline", p, err))
		}
	}
	for _, pair := range plan.Refresh {
		// One CR that cannot take the Fleet pipeline's new state (a Fleet-side edit the CRD or the webhook
		// refuses) must not stop the others from being refreshed, nor the retiring and counting below.
		if err := r.refresh(ctx, d, crs[pair.CR.Name], byID[pair.Remote.ID]); err != nil {
			failures = append(failures, failure("Pipeline", crs[pair.CR.Name], err))
		}
	}
	pruned, stale, retireFailures := r.retire(ctx, d, retiring, crs)
	failures = append(failures, retireFailures...)
	managed -= pruned
	previous := map[string]bool{}
	for _, c := range d.Status.Conflicts {
		previous[c.PipelineID] = true
	}
	d.Status.PipelinesObserved, d.Status.PipelinesManaged, d.Status.StalePipelines = int32(len(remotes)), int32(managed), int32(stale)
	summary := fmt.Sprintf("%d Fleet pipeline(s) selected, %d Pipeline(s) in %s (%d stale), %d conflict(s)",
		len(remotes), managed, target, stale, len(plan.Conflicts))
	conflicts, err := r.report(d, st, pollReport{kind: "PipelineDiscovery", now: now, previous: previous, conflicts: plan.Conflicts,
		failures: failures, created: created, pruned: pruned, summary: summary})
	d.Status.Conflicts = nil
	for _, c := range conflicts {
		d.Status.Conflicts = append(d.Status.Conflicts, fleetv1alpha1.PipelineDiscoveryConflict{
			PipelineID: c.ID, CRName: c.CRName, Reason: c.Reason, Message: c.Message})
	}
	return ctrl.Result{RequeueAfter: interval}, err
}

func existingPipeline(p *fleetv1alpha1.Pipeline) discovery.Existing {
	a := p.GetAnnotations()
	return discovery.Existing{Name: p.Name, DiscoveredBy: a[fleetv1alpha1.AnnotationPipelineDiscoveredBy],
		ID: a[fleetv1alpha1.AnnotationFleetPipelineID], Stale: a[fleetv1alpha1.AnnotationPipelineDiscoveryStale] == "true"}
}

// managedHere reports whether a Fleet pipeline carries this cluster's ownership marker naming a CR other than one
// of this discovery's own: such a pipeline already has its CR here, so it is never imported (a duplicate would
// sit in NameCollision and could bring the pipeline back after its CR deleted it).
func (r *PipelineDiscoveryReconciler) managedHere(fp *pipelinev1.Pipeline, target string, crs map[string]*fleetv1alpha1.Pipeline) bool {
	m, ok := pipelines.MarkerOf(fp)
	if !ok || m.Cluster != r.Cluster {
		return false
	}
	own, mine := crs[m.Name]
	return m.Namespace != target || !mine || string(own.UID) != m.UID
}

// importMode is the import-mode annotation for a Fleet pipeline: Grafana-sourced pipelines and pipelines another
// cluster's CR owns (by marker) are only ever mirrored.
func (r *PipelineDiscoveryReconciler) importMode(d *fleetv1alpha1.PipelineDiscovery, fp *pipelinev1.Pipeline) string {
	if d.Spec.ImportMode == fleetv1alpha1.DiscoveryReadOnly || pipelines.IsGrafanaSourced(fp) {
		return fleetv1alpha1.ImportModeReadOnly
	}
	if m, ok := pipelines.MarkerOf(fp); ok && m.Cluster != r.Cluster {
		return fleetv1alpha1.ImportModeReadOnly
	}
	return fleetv1alpha1.ImportModeAdopt
}

// newPipeline is the CR for a Fleet pipeline. The name scope is pinned to none so that the CR writes the very
// pipeline it came from whatever --pipeline-name-scope says.
func (r *PipelineDiscoveryReconciler) newPipeline(d *fleetv1alpha1.PipelineDiscovery, ns, name string, fp *pipelinev1.Pipeline) *fleetv1alpha1.Pipeline {
	return &fleetv1alpha1.Pipeline{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{
				fleetv1alpha1.LabelPipelineDiscoveryName:      d.Name,
				fleetv1alpha1.LabelPipelineDiscoveryNamespace: d.Namespace,
			},
			Annotations: map[string]string{
				fleetv1alpha1.AnnotationImportMode:           r.importMode(d, fp),
				fleetv1alpha1.AnnotationFleetPipelineID:      fp.GetId(),
				fleetv1alpha1.AnnotationPipelineDiscoveredBy: d.Namespace + "/" + d.Name,
				fleetv1alpha1.AnnotationNameScope:            fleetv1alpha1.NameScopeNone,
			},
		},
		Spec: pipelines.SpecFromProto(fp),
	}
}

// refresh clears a stale mark and keeps the import mode in line with the discovery. A read-only CR mirrors the
// Fleet pipeline, spec and status; an adopted CR is the source of truth and its spec is left alone.
func (r *PipelineDiscoveryReconciler) refresh(ctx context.Context, d *fleetv1alpha1.PipelineDiscovery, p *fleetv1alpha1.Pipeline, fp *pipelinev1.Pipeline) error {
	if !p.DeletionTimestamp.IsZero() {
		return nil
	}
	changed := setAnnotation(p, fleetv1alpha1.AnnotationPipelineDiscoveryStale, "")
	mode := r.importMode(d, fp)
	changed = setAnnotation(p, fleetv1alpha1.AnnotationImportMode, mode) || changed
	if mode == fleetv1alpha1.ImportModeReadOnly {
		want := pipelines.SpecFromProto(fp)
		want.Paused = p.Spec.Paused
		if !equality.Semantic.DeepEqual(p.Spec, want) {
			p.Spec = want
			changed = true
		}
	}
	if changed {
		if err := r.Update(ctx, p); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if mode == fleetv1alpha1.ImportModeReadOnly {
		return r.mirror(ctx, p, fp)
	}
	return nil
}

// mirror writes what Fleet holds for a read-only CR's pipeline (ID, contents hash, enabled, times) into its
// status, only when it changed.
func (r *PipelineDiscoveryReconciler) mirror(ctx context.Context, p *fleetv1alpha1.Pipeline, fp *pipelinev1.Pipeline) error {
	before := p.DeepCopy()
	pipelines.ApplyStatus(&p.Status, fp)
	return client.IgnoreNotFound(kube.PatchStatusIfChanged(ctx, r.Client, before, p))
}

// retire deletes the CRs whose pipeline is gone from Fleet (under Delete) and marks the others stale. It returns
// how many were deleted, how many are stale, and the CRs it could not write.
func (r *PipelineDiscoveryReconciler) retire(ctx context.Context, d *fleetv1alpha1.PipelineDiscovery, retiring discovery.Retirement,
	crs map[string]*fleetv1alpha1.Pipeline) (pruned, stale int, failures []string) {
	for _, e := range retiring.Delete {
		if err := r.Delete(ctx, crs[e.Name]); client.IgnoreNotFound(err) != nil {
			failures = append(failures, failure("Pipeline", crs[e.Name], err))
			continue
		}
		pruned++
	}
	for _, e := range retiring.Stale {
		p := crs[e.Name]
		if setAnnotation(p, fleetv1alpha1.AnnotationPipelineDiscoveryStale, "true") {
			r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, "Stale", "Poll", "Pipeline %s/%s: Fleet pipeline %s is no longer selected", p.Namespace, p.Name, e.ID)
			if err := r.Update(ctx, p); client.IgnoreNotFound(err) != nil {
				failures = append(failures, failure("Pipeline", p, err))
			}
		}
	}
	return pruned, len(retiring.Stale), failures
}

// SetupWithManager registers the controller: spec changes wake it, the poll interval requeues it, its own status
// writes do not.
func (r *PipelineDiscoveryReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	initSyncOutcomes("PipelineDiscovery")
	if err := indexDiscovered(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(PipelineDiscoveryControllerName).
		For(&fleetv1alpha1.PipelineDiscovery{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(kube.ControllerOptions{MaxConcurrentReconciles: r.MaxConcurrentReconciles}.Options()).
		Complete(telemetry.TracedReconciler(PipelineDiscoveryControllerName, r))
}
