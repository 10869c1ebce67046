package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

// NameTakenRequeue is how often a Pipeline whose Fleet name is held by a pipeline it may not touch looks again
// (the other pipeline may be deleted or renamed in Fleet, which sends no event).
const NameTakenRequeue = 5 * time.Minute

// errNameTaken is a write refused because the Fleet name belongs to a pipeline this CR did not create. sibling is
// set when another Pipeline CR of this cluster owns it (by marker): that one may be mid-rename or mid-delete, so
// the name is looked at again soon.
type errNameTaken struct {
	id      string
	sibling bool
}

func (e *errNameTaken) Error() string {
	return fmt.Sprintf("a Fleet pipeline with this name (ID %s) exists that this Pipeline neither created nor was told to adopt", e.id)
}

// written is what a successful write did.
type written struct {
	res      *pipelinev1.Pipeline
	created  bool
	adopted  bool
	recreate bool
}

// write makes the Fleet pipeline match p without ever taking over a pipeline made elsewhere: the first write of a
// name is CreatePipeline (already_exists when the name is taken, decided by Fleet, so there is no race with another
// writer), later writes are UpdatePipeline by the ID this CR recorded. A taken name is updated only when p carries
// import-mode adopt or the pipeline carries this CR's marker (a CR that lost status.id re-adopts its own pipeline).
func (r *PipelineReconciler) write(ctx context.Context, fc *fleetclient.Client, p *fleetv1alpha1.Pipeline, name string) (written, error) {
	marker := pipelines.MarkerFor(r.Cluster, p)
	desired := pipelines.ToProto(p, name)
	desired.Metadata = marker.Struct()
	var w written
	if p.Status.ID != "" && p.Status.SyncedName == name {
		desired.Id = &p.Status.ID
		res, err := fc.UpdatePipeline(ctx, desired)
		if !fleetclient.IsNotFound(err) {
			w.res = res
			return w, err
		}
		// The pipeline vanished (deleted in Fleet): create it again under a new ID.
		w.recreate, desired.Id = true, nil
	}
	res, err := fc.CreatePipeline(ctx, desired)
	if err == nil {
		w.res, w.created = res, true
		return w, nil
	}
	if !fleetclient.IsAlreadyExists(err) {
		return w, err
	}
	id, err := fc.GetPipelineID(ctx, name)
	if err != nil {
		return w, err
	}
	existing, err := fc.GetPipeline(ctx, id)
	if err != nil {
		return w, err
	}
	if !pipelines.Adopts(p) && !pipelines.OwnedBy(existing, marker) {
		other, ok := pipelines.MarkerOf(existing)
		return w, &errNameTaken{id: id, sibling: ok && other.Cluster == r.Cluster}
	}
	desired.Id = &id
	w.res, err = fc.UpdatePipeline(ctx, desired)
	w.adopted = !pipelines.OwnedBy(existing, marker)
	return w, err
}

// upsert writes the pipeline and records the answer; after a rename it deletes the pipeline the CR created under
// its old name (make-before-break: the new one exists first).
func (r *PipelineReconciler) upsert(ctx context.Context, p *fleetv1alpha1.Pipeline, name string) (ctrl.Result, error) {
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		r.failed(p, fleetv1alpha1.ReasonSyncFailed, err)
		return ctrl.Result{}, err
	}
	var previous string
	if p.Status.ID != "" && p.Status.SyncedName != "" && p.Status.SyncedName != name {
		previous = p.Status.ID
	}
	w, err := r.write(ctx, fc, p, name)
	if w.recreate {
		p.Status.ID = ""
		recordSync("Pipeline", "Recreated")
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "Recreated", "Upsert", "Fleet pipeline %q was gone; creating it again", name)
	}
	var taken *errNameTaken
	switch {
	case err == nil:
		pipelines.ApplyStatus(&p.Status, w.res)
		p.Status.ObservedGeneration = p.Generation
		msg := fmt.Sprintf("Fleet pipeline %q (ID %s) is in sync", name, p.Status.ID)
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, msg)
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, msg)
		reason := "Updated"
		switch {
		case w.adopted:
			reason = "Adopted"
		case w.created:
			reason = "Created"
		}
		recordSync("Pipeline", fleetv1alpha1.ReasonSynced)
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, reason, "Upsert", "%s Fleet pipeline %q (ID %s)", reason, name, p.Status.ID)
		if previous != "" && previous != p.Status.ID && !slices.Contains(p.Status.OrphanedPipelineIDs, previous) {
			p.Status.OrphanedPipelineIDs = append(p.Status.OrphanedPipelineIDs, previous)
		}
		return ctrl.Result{}, r.deleteOrphans(ctx, fc, p)
	case errors.As(err, &taken):
		p.Status.ObservedGeneration = p.Generation
		recordSync("Pipeline", fleetv1alpha1.ReasonNameTaken)
		msg := fmt.Sprintf("Fleet pipeline %q (ID %s) was not created by this Pipeline; set the %s=%s annotation to take it over "+
			"(deleting the Pipeline then deletes it), or choose another spec.name", name, taken.id,
			fleetv1alpha1.AnnotationImportMode, fleetv1alpha1.ImportModeAdopt)
		if ready := readyReason(p); ready != fleetv1alpha1.ReasonNameTaken {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonNameTaken, "Upsert", "%s", msg)
		}
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonNameTaken, msg)
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonNameTaken, msg)
		if taken.sibling {
			return ctrl.Result{RequeueAfter: RateLimitedRequeue}, nil
		}
		return ctrl.Result{RequeueAfter: NameTakenRequeue}, nil
	case fleetclient.IsRateLimited(err):
		recordSync("Pipeline", fleetv1alpha1.ReasonRateLimited)
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonRateLimited,
			fmt.Sprintf("Fleet Management answered 429; retrying in %s", rateLimitWait(err)))
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "RateLimited", "Upsert", "Fleet Management rate limit; retrying in %s", rateLimitWait(err))
		return ctrl.Result{RequeueAfter: rateLimitWait(err)}, nil
	case fleetclient.IsInvalid(err):
		// The same spec will be refused again: record it and wait for a spec change.
		p.Status.ObservedGeneration = p.Generation
		recordSync("Pipeline", fleetv1alpha1.ReasonValidationError)
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonValidationError, err.Error())
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonValidationError, err.Error())
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "ValidationFailed", "Upsert", "Fleet Management rejected the pipeline: %v", err)
		return ctrl.Result{}, nil
	default:
		if fleetclient.IsUnauthenticated(err) {
			r.Fleet.Invalidate()
		}
		r.failed(p, fleetv1alpha1.ReasonSyncFailed, err)
		return ctrl.Result{}, err
	}
}

// deleteOrphans deletes the pipelines this CR left under earlier names, dropping each that is gone; one that
// cannot be deleted stays listed in status and the error sends the reconcile into backoff to try again.
func (r *PipelineReconciler) deleteOrphans(ctx context.Context, fc *fleetclient.Client, p *fleetv1alpha1.Pipeline) error {
	var left []string
	var errs []error
	for _, id := range p.Status.OrphanedPipelineIDs {
		if id == p.Status.ID {
			continue
		}
		if err := fc.DeletePipeline(ctx, id); err != nil && !fleetclient.IsNotFound(err) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "OrphanDeleteFailed", "Delete",
				"Fleet pipeline %s (the name before a rename) could not be deleted; retrying: %v", id, err)
			left = append(left, id)
			errs = append(errs, fmt.Errorf("deleting Fleet pipeline %s left by a rename: %w", id, err))
			continue
		}
		r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "Deleted", "Delete", "Deleted Fleet pipeline %s (the name before a rename)", id)
	}
	p.Status.OrphanedPipelineIDs = left
	return errors.Join(errs...)
}

func readyReason(p *fleetv1alpha1.Pipeline) string {
	for _, c := range p.Status.Conditions {
		if c.Type == fleetv1alpha1.ConditionReady {
			return c.Reason
		}
	}
	return ""
}
