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
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/discovery"
	"github.com/quartet-dev/quartet-operator/internal/kube"
)

// Field indexes of the discovery controllers: the CRs a discovery created, by its ns/name.
const (
	pipelineDiscoveredByField  = "metadata.annotations.pipeline-discovered-by"
	collectorDiscoveredByField = "metadata.annotations.discovered-by"
)

func indexDiscovered(ctx context.Context, mgr manager.Manager) error {
	if err := kube.IndexField(ctx, mgr, &fleetv1alpha1.Pipeline{}, pipelineDiscoveredByField, func(o client.Object) []string {
		if v := o.GetAnnotations()[fleetv1alpha1.AnnotationPipelineDiscoveredBy]; v != "" {
			return []string{v}
		}
		return nil
	}); err != nil {
		return err
	}
	return kube.IndexField(ctx, mgr, &fleetv1alpha1.Collector{}, collectorDiscoveredByField, func(o client.Object) []string {
		if v := o.GetAnnotations()[fleetv1alpha1.AnnotationDiscoveredBy]; v != "" {
			return []string{v}
		}
		return nil
	})
}

// Poller is what both discovery reconcilers share: the clock, events and the poll bookkeeping.
type Poller struct {
	Recorder recorder.EventRecorder
	Clock    clock.PassiveClock
}

func (p Poller) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}

func pollInterval(d *metav1.Duration) time.Duration { return discovery.PollInterval(d) }

func untilDue(st *fleetv1alpha1.DiscoveryStatus, generation int64, interval time.Duration, now time.Time) time.Duration {
	return discovery.UntilDue(st, generation, interval, now)
}

// pollFailed records a poll that could not list Fleet and returns when to try again: the failure retry of
// untilDue, or after a 429 the server's Retry-After when that is longer.
func (p Poller) pollFailed(obj client.Object, st *fleetv1alpha1.DiscoveryStatus, kind string, fleet Clients, err error) ctrl.Result {
	reason := fleetv1alpha1.ReasonListFailed
	if fleetclient.IsRateLimited(err) {
		reason = fleetv1alpha1.ReasonRateLimited
	}
	recordSync(kind, reason)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, reason, err.Error())
	retry := untilDue(st, obj.GetGeneration(), time.Hour, p.now())
	switch {
	case fleetclient.IsRateLimited(err):
		retry = max(retry, rateLimitWait(err))
		p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "RateLimited", "List", "Fleet Management rate limit; retrying in %s", retry)
	case fleetclient.IsUnauthenticated(err):
		fleet.Invalidate()
		fallthrough
	default:
		p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Failed", "List", "%v", err)
	}
	return ctrl.Result{RequeueAfter: retry}
}

// pollSucceeded records the outcome of a successful poll: conditions, conflicts truncation, events.
func (p Poller) pollSucceeded(obj client.Object, st *fleetv1alpha1.DiscoveryStatus, kind string, now metav1.Time,
	truncated bool, created, pruned int, summary string) {
	st.LastSuccessTime = &now
	recordSync(kind, fleetv1alpha1.ReasonSynced)
	if created > 0 {
		p.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Discovered", "Poll", "created %d CR(s)", created)
	}
	if pruned > 0 {
		p.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Pruned", "Poll", "deleted %d CR(s) whose Fleet object is gone", pruned)
	}
	wasTruncated := meta.IsStatusConditionTrue(st.Conditions, fleetv1alpha1.ConditionTruncatedConflicts)
	if truncated {
		msg := fmt.Sprintf("more than %d conflicts; status.conflicts lists the first %d by ID", fleetv1alpha1.MaxDiscoveryConflicts, fleetv1alpha1.MaxDiscoveryConflicts)
		if !wasTruncated {
			p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "TruncatedConflicts", "Poll", "%s", msg)
		}
		setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionTruncatedConflicts, metav1.ConditionTrue, fleetv1alpha1.ReasonConflictsTruncated, msg)
	} else {
		setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionTruncatedConflicts, metav1.ConditionFalse, fleetv1alpha1.ReasonNotTruncated, "every conflict is listed")
	}
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionStalled, metav1.ConditionFalse, fleetv1alpha1.ReasonNotStalled, "the last poll listed Fleet objects")
	wasReady := meta.IsStatusConditionTrue(st.Conditions, fleetv1alpha1.ConditionReady)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, summary)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionSynced, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, summary)
	if !wasReady {
		p.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Synced", "Poll", "%s", summary)
	}
}

// pollEmptyResult records a poll whose Fleet list was empty while the discovery manages managed CRs: it is
// taken for an outage or a wrong stack, not for every object being deleted, so the CRs are left as they are.
func (p Poller) pollEmptyResult(obj client.Object, st *fleetv1alpha1.DiscoveryStatus, kind string, managed int) {
	msg := fmt.Sprintf("Fleet listed no objects at all while this discovery manages %d CR(s); nothing is deleted or marked stale until a poll lists objects again", managed)
	if !meta.IsStatusConditionTrue(st.Conditions, fleetv1alpha1.ConditionStalled) {
		p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonEmptyResult, "Poll", "%s", msg)
	}
	recordSync(kind, fleetv1alpha1.ReasonEmptyResult)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionStalled, metav1.ConditionTrue, fleetv1alpha1.ReasonEmptyResult, msg)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonEmptyResult, msg)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonEmptyResult, msg)
}

// conflictEvents emits one Conflict event per conflict that was not reported by the previous poll.
func (p Poller) conflictEvents(obj client.Object, previous map[string]bool, conflicts []discovery.Conflict) {
	for _, c := range conflicts {
		if !previous[c.ID] {
			p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Conflict", "Poll", "Fleet ID %q: %s: %s", c.ID, c.Reason, c.Message)
		}
	}
}

func setDiscoveryCondition(obj client.Object, st *fleetv1alpha1.DiscoveryStatus, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: obj.GetGeneration()})
}

// targetNamespace is where a discovery writes its CRs.
func targetNamespace(obj client.Object, target string) string {
	if target == "" {
		return obj.GetNamespace()
	}
	return target
}

// setAnnotation sets or removes (value "") an annotation and reports whether anything changed.
func setAnnotation(obj client.Object, key, value string) bool {
	a := obj.GetAnnotations()
	if a[key] == value {
		return false
	}
	if a == nil {
		a = map[string]string{}
	}
	if value == "" {
		delete(a, key)
	} else {
		a[key] = value
	}
	obj.SetAnnotations(a)
	return true
}

// pollReport is the outcome of one poll that listed Fleet: the bookkeeping both discoveries share.
type pollReport struct {
	kind string
	now  metav1.Time
	// previous are the conflict IDs the status listed before this poll (for one event per new conflict).
	previous map[string]bool
	// conflicts are the objects that got no CR.
	conflicts []discovery.Conflict
	// failures name each CR that could not be created, updated, retired or read, with the reason; the poll still
	// did everything else.
	failures        []string
	created, pruned int
	summary         string
}

// report sorts and caps the conflicts (returned for the caller's status type), emits the events and sets the
// conditions. With failures, Ready and Synced are False naming them, lastSuccessTime is not advanced and the
// returned error sends the reconcile into backoff; the poll interval still applies, so Fleet is not listed more
// often.
func (p Poller) report(obj client.Object, st *fleetv1alpha1.DiscoveryStatus, rep pollReport) ([]discovery.Conflict, error) {
	discovery.SortConflicts(rep.conflicts)
	conflicts, truncated := discovery.CapConflicts(rep.conflicts, fleetv1alpha1.MaxDiscoveryConflicts)
	p.conflictEvents(obj, rep.previous, conflicts)
	if len(rep.failures) == 0 {
		p.pollSucceeded(obj, st, rep.kind, rep.now, truncated, rep.created, rep.pruned, rep.summary)
		return conflicts, nil
	}
	msg := fmt.Sprintf("%s; %d CR(s) could not be written: %s", rep.summary, len(rep.failures), strings.Join(rep.failures, "; "))
	recordSync(rep.kind, fleetv1alpha1.ReasonCRWriteFailed)
	p.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Failed", "Poll", "%s", msg)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonCRWriteFailed, msg)
	setDiscoveryCondition(obj, st, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, fleetv1alpha1.ReasonCRWriteFailed, msg)
	return conflicts, fmt.Errorf("%s poll: %s", rep.kind, strings.Join(rep.failures, "; "))
}

// createDiscovered creates obj. When it exists already (the cache had not seen it) it reads the API server's copy
// into live through reader, for the caller to classify; exists reports that case.
func createDiscovered(ctx context.Context, c client.Client, reader client.Reader, obj, live client.Object) (exists bool, err error) {
	err = c.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	return true, reader.Get(ctx, client.ObjectKeyFromObject(obj), live)
}

// failure formats one CR failure for a report.
func failure(kind string, obj client.Object, err error) string {
	return fmt.Sprintf("%s %s/%s: %v", kind, obj.GetNamespace(), obj.GetName(), err)
}
