package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	if by := p.Annotations[fleetv1alpha1.AnnotationPipelineDiscoveredBy]; by != "" {
		alive, err := r.discoveryAlive(ctx, by)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !alive {
			msg := fmt.Sprintf("read-only: PipelineDiscovery %s, which alone mirrors this CR, no longer exists, so its status is "+
				"frozen (last Fleet update %s); remove the %s annotation to have this CR mirrored on its own, or delete it",
				by, p.Status.UpdatedAt, fleetv1alpha1.AnnotationPipelineDiscoveredBy)
			if readyReason(p) != fleetv1alpha1.ReasonDiscoveryGone {
				r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonDiscoveryGone, "Sync", "%s", msg)
			}
			setCondition(p, fleetv1alpha1.ConditionReady, metav1.ConditionUnknown, fleetv1alpha1.ReasonDiscoveryGone, msg)
			return ctrl.Result{}, nil
		}
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

// discoveryAlive reports whether the PipelineDiscovery named ns/name by a discovered-by annotation exists and is
// not being deleted.
func (r *PipelineReconciler) discoveryAlive(ctx context.Context, by string) (bool, error) {
	ns, name, _ := strings.Cut(by, "/")
	d := &fleetv1alpha1.PipelineDiscovery{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return d.DeletionTimestamp.IsZero(), nil
}

// discoveredPipelines wakes the Pipelines a PipelineDiscovery created when it comes or goes, so a read-only one
// reports (or stops reporting) that nothing refreshes it.
func (r *PipelineReconciler) discoveredPipelines(ctx context.Context, o client.Object) []reconcile.Request {
	list := &fleetv1alpha1.PipelineList{}
	if err := r.List(ctx, list, client.MatchingLabels{
		fleetv1alpha1.LabelPipelineDiscoveryName:      o.GetName(),
		fleetv1alpha1.LabelPipelineDiscoveryNamespace: o.GetNamespace(),
	}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// wasMirrored reports whether status.id was copied by a read-only mirror rather than written by this CR: a
// Pipeline switched from read-only to managed must not update or delete a pipeline it only looked at.
func wasMirrored(p *fleetv1alpha1.Pipeline) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, fleetv1alpha1.ConditionSynced)
	return c != nil && c.Reason == fleetv1alpha1.ReasonReadOnly
}
