package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

// NameTakenRequeue is how often a Pipeline whose Fleet name is held by a pipeline it may not touch looks again
// (the other pipeline may be deleted or renamed in Fleet, which sends no event).
const NameTakenRequeue = 5 * time.Minute

// errRefused is a write refused because the Fleet name belongs to a pipeline this CR may not take over. reason is
// the Ready reason (NameTaken, GrafanaManaged, OwnedElsewhere, PipelineGone); sibling is set when another Pipeline
// CR of this cluster owns it (by marker): that one may be mid-rename or mid-delete, so the name is looked at again
// sooner.
type errRefused struct {
	reason, id, msg string
	sibling         bool
}

func (e *errRefused) Error() string { return e.msg }

// written is what a successful write did.
type written struct {
	res      *pipelinev1.Pipeline
	created  bool
	adopted  bool
	recreate bool
}

// write makes the Fleet pipeline match p without ever taking over a pipeline made elsewhere: the first write of a
// name is CreatePipeline (already_exists when the name is taken, decided by Fleet, so there is no race with another
// writer), later writes are UpdatePipeline by the ID this CR recorded. A taken name is updated only when the
// pipeline carries this CR's marker (a CR that lost status.id re-adopts its own pipeline), or when p carries
// import-mode adopt, has never owned a pipeline, and the pipeline is neither Grafana-sourced nor marked by another
// CR (adoptable). A discovered CR that never owned its pipeline only adopts: it never creates one, so a CR
// discovered next to the pipeline's real owner cannot bring it back after that owner deleted it. A refusal
// remembers the pipeline holding the name (nameConflicts), so the next try reads only that one pipeline.
func (r *PipelineReconciler) write(ctx context.Context, fc *fleetclient.Client, p *fleetv1alpha1.Pipeline, name string) (written, error) {
	marker := pipelines.MarkerFor(r.Cluster, p)
	desired := pipelines.ToProto(p, name)
	desired.Metadata = marker.Struct()
	var w written
	established := p.Status.OwnershipEstablished || p.Status.ID != ""
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
	key := client.ObjectKeyFromObject(p)
	id, existing, err := r.conflicts.recheck(ctx, fc, key, p.UID, name)
	if err != nil {
		return w, err
	}
	switch {
	case existing != nil:
		// The pipeline that held the name last time still holds it: decided again below from this one read.
	case p.Annotations[fleetv1alpha1.AnnotationPipelineDiscoveredBy] != "" && !established:
		if id, err = fc.GetPipelineID(ctx, name); fleetclient.IsNotFound(err) {
			return w, &errRefused{reason: fleetv1alpha1.ReasonPipelineGone, msg: fmt.Sprintf("Fleet pipeline %q is gone; "+
				"this Pipeline was discovered and never owned it, so it does not create it again (its discovery marks or "+
				"deletes it)", name)}
		} else if err != nil {
			return w, err
		}
	default:
		res, err := fc.CreatePipeline(ctx, desired)
		if err == nil {
			w.res, w.created = res, true
			return w, nil
		}
		if !fleetclient.IsAlreadyExists(err) {
			return w, err
		}
		if id, err = fc.GetPipelineID(ctx, name); err != nil {
			return w, err
		}
	}
	if existing == nil {
		if existing, err = fc.GetPipeline(ctx, id); err != nil {
			return w, err
		}
	}
	owned := pipelines.OwnedBy(existing, marker)
	if !owned {
		if refused := r.refuseAdoption(p, existing, name, established); refused != nil {
			r.conflicts.remember(key, nameConflict{uid: p.UID, name: name, id: id})
			return w, refused
		}
	}
	r.conflicts.forget(key)
	desired.Id = &id
	w.res, err = fc.UpdatePipeline(ctx, desired)
	w.adopted = !owned
	return w, err
}

// refuseAdoption decides whether p may take over existing, a pipeline of its name it does not own: nil when it may.
func (r *PipelineReconciler) refuseAdoption(p *fleetv1alpha1.Pipeline, existing *pipelinev1.Pipeline, name string, established bool) *errRefused {
	id := existing.GetId()
	if other, ok := pipelines.MarkerOf(existing); ok {
		return &errRefused{reason: fleetv1alpha1.ReasonOwnedElsewhere, id: id, sibling: other.Cluster == r.Cluster,
			msg: fmt.Sprintf("Fleet pipeline %q (ID %s) belongs to Pipeline %s/%s (UID %s) of cluster %s by its ownership marker; "+
				"it is never adopted: choose another spec.name", name, id, other.Namespace, other.Name, other.UID, other.Cluster)}
	}
	if pipelines.IsGrafanaSourced(existing) {
		return &errRefused{reason: fleetv1alpha1.ReasonGrafanaManaged, id: id,
			msg: fmt.Sprintf("Fleet pipeline %q (ID %s) is managed in Grafana (source Grafana); it is never adopted: "+
				"choose another spec.name, or mirror it with %s=%s", name, id, fleetv1alpha1.AnnotationImportMode, fleetv1alpha1.ImportModeReadOnly)}
	}
	switch {
	case !pipelines.Adopts(p):
		return &errRefused{reason: fleetv1alpha1.ReasonNameTaken, id: id,
			msg: fmt.Sprintf("Fleet pipeline %q (ID %s) was not created by this Pipeline; set the %s=%s annotation to take it over "+
				"(deleting the Pipeline then deletes it), or choose another spec.name", name, id,
				fleetv1alpha1.AnnotationImportMode, fleetv1alpha1.ImportModeAdopt)}
	case established:
		return &errRefused{reason: fleetv1alpha1.ReasonNameTaken, id: id,
			msg: fmt.Sprintf("Fleet pipeline %q (ID %s) was not created by this Pipeline, which already created or adopted its "+
				"pipeline once: %s=%s acts only once, so it does not take over a pipeline made since; choose another "+
				"spec.name, or delete the Fleet pipeline to have it recreated from this CR", name, id,
				fleetv1alpha1.AnnotationImportMode, fleetv1alpha1.ImportModeAdopt)}
	}
	return nil
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
		// It had an ID under this name: whatever happens next, import-mode adopt has acted.
		p.Status.ID, p.Status.OwnershipEstablished = "", true
		recordSync("Pipeline", "Recreated")
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "Recreated", "Upsert", "Fleet pipeline %q was gone; creating it again", name)
	}
	var refused *errRefused
	switch {
	case err == nil:
		pipelines.ApplyStatus(&p.Status, w.res)
		p.Status.OwnershipEstablished = true
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
	case errors.As(err, &refused):
		p.Status.ObservedGeneration = p.Generation
		recordSync("Pipeline", refused.reason)
		if readyReason(p) != refused.reason {
			r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, refused.reason, "Upsert", "%s", refused.msg)
		}
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, refused.reason, refused.msg)
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, refused.reason, refused.msg)
		if refused.sibling {
			// Another CR of this cluster (mid-rename or mid-delete, or a leftover marker): soon at first, then
			// backing off, so that ten such Pipelines cannot spend the whole rate budget.
			since := time.Since(meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionReady).LastTransitionTime.Time)
			first := r.NameTakenRetry
			if first <= 0 {
				first = RateLimitedRequeue
			}
			return ctrl.Result{RequeueAfter: pipelines.BackoffSince(since, first, NameTakenRequeue)}, nil
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
