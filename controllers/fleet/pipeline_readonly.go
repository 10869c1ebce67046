package fleet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

// DefaultReadOnlyPoll is how often a read-only Pipeline that no discovery refreshes mirrors its Fleet pipeline.
const DefaultReadOnlyPoll = 5 * time.Minute

// readOnly never writes to Fleet. A discovery's CR is mirrored by its discovery on each poll; any other read-only
// CR is mirrored here, on ReadOnlyPoll, by looking its Fleet name up. The Synced condition keeps reason ReadOnly
// whatever happens, which is how a later switch to managed knows status.id was mirrored, not written.
func (r *PipelineReconciler) readOnly(ctx context.Context, p, before *fleetv1alpha1.Pipeline, name string) (ctrl.Result, error) {
	p.Status.ObservedGeneration = p.Generation
	ok := func(msg string) {
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonReadOnly, msg)
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionTrue, fleetv1alpha1.ReasonReadOnly, "read-only")
		if !meta.IsStatusConditionTrue(before.Status.Conditions, fleetv1alpha1.ConditionReady) {
			r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "ReadOnly", "Sync", "Pipeline %q is read-only", name)
		}
	}
	if p.Annotations[fleetv1alpha1.AnnotationPipelineDiscoveredBy] != "" {
		ok("read-only: the Fleet pipeline is never written or deleted from this CR; its discovery mirrors it into status")
		return ctrl.Result{}, nil
	}
	poll := r.ReadOnlyPoll
	if poll <= 0 {
		poll = DefaultReadOnlyPoll
	}
	fail := func(err error) {
		setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSyncFailed, err.Error())
		setCondition(p, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonReadOnly, err.Error())
	}
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		fail(err)
		return ctrl.Result{}, err
	}
	id, err := fc.GetPipelineID(ctx, name)
	if err == nil {
		fp, gerr := fc.GetPipeline(ctx, id)
		if gerr == nil {
			pipelines.ApplyStatus(&p.Status, fp)
			ok(fmt.Sprintf("read-only: mirrors Fleet pipeline %q (ID %s); it is never written or deleted from this CR", name, p.Status.ID))
			return ctrl.Result{RequeueAfter: poll}, nil
		}
		err = gerr
	}
	switch {
	case fleetclient.IsNotFound(err):
		fail(fmt.Errorf("read-only: Fleet has no pipeline named %q; looking again in %s", name, poll))
		return ctrl.Result{RequeueAfter: poll}, nil
	case fleetclient.IsRateLimited(err):
		fail(err)
		return ctrl.Result{RequeueAfter: rateLimitWait(err)}, nil
	case fleetclient.IsUnauthenticated(err):
		r.Fleet.Invalidate()
	}
	fail(err)
	return ctrl.Result{}, err
}

// wasMirrored reports whether status.id was copied by a read-only mirror rather than written by this CR: a
// Pipeline switched from read-only to managed must not update or delete a pipeline it only looked at.
func wasMirrored(p *fleetv1alpha1.Pipeline) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionSynced)
	return c != nil && c.Reason == fleetv1alpha1.ReasonReadOnly
}
