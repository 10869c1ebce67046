package gnmic

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// TargetSourceControllerName is the controller name, unique across groups.
const TargetSourceControllerName = "gnmic-targetsource"

// maxFailedDevices is how many failed devices status lists.
const maxFailedDevices = 10

// TargetSourceReconciler turns an inventory into Targets: each run fetches the whole inventory, applies the
// differences with server-side apply and writes status once.
type TargetSourceReconciler struct {
	client.Client
	// APIReader reads Secrets and ConfigMaps straight from the API server (neither is cached).
	APIReader client.Reader
	// Writer sends the Target applies without decoding the answers; nil sends them through Client.
	Writer   *TargetWriter
	Recorder recorder.EventRecorder
	Mapper   *targetsource.Mapper
	// Guard is the SSRF guard every inventory fetch dials through; nil blocks every special-purpose range.
	Guard *netguard.Guard
	// WriteQPS is the rate limit of the client the Target writes go through; it sizes the write budget of a run
	// (0: client-go's default).
	WriteQPS float64
	// WriteSharers is how many runs may write at once through Writer (the controller's MaxConcurrentReconciles):
	// they share WriteQPS, and each run's write budget is sized for its share (0 or 1: alone).
	WriteSharers int
	// Clock and Rand are injectable for tests; nil uses the real clock and math/rand.
	Clock clock.PassiveClock
	Rand  func() float64
}

// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targetsources,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targetsources/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=operator.gnmic.dev,resources=targets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *TargetSourceReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *TargetSourceReconciler) rand() float64 {
	if r.Rand == nil {
		return rand.Float64() //nolint:gosec // jitter, not security
	}
	return r.Rand()
}

// outcome is the result of one run, before it is written to status.
type outcome struct {
	result    string // success, failure, held
	reason    string // Ready reason
	message   string
	stalled   bool
	capacity  bool
	fetched   fetched
	plan      targetsource.Plan
	converged converged
	err       error
}

// Reconcile runs the TargetSource once and patches its status once, only if it changed.
func (r *TargetSourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ts := &gnmicv1alpha1.TargetSource{}
	if err := r.Get(ctx, req.NamespacedName, ts); err != nil {
		if client.IgnoreNotFound(err) == nil {
			forgetTargetSourceMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := ts.DeepCopy()
	st := &ts.Status
	st.ObservedGeneration = ts.Generation
	if ts.Spec.Suspend {
		r.setCondition(ts, gnmicv1alpha1.TargetSourceConditionReady, metav1.ConditionFalse, gnmicv1alpha1.ReasonSuspended, "spec.suspend is true")
		r.setCondition(ts, gnmicv1alpha1.TargetSourceConditionReconciling, metav1.ConditionFalse, gnmicv1alpha1.ReasonSuspended, "spec.suspend is true")
		st.NextSyncTime = nil
		recordTargetSourceInterval(ts.Namespace, ts.Name, 0)
		return ctrl.Result{}, kube.PatchStatusIfChanged(ctx, r.Client, before, ts)
	}
	interval := durationOr(ts.Spec.Interval, 5*time.Minute)
	recordTargetSourceInterval(ts.Namespace, ts.Name, interval)
	initTargetSourceResults(ts.Namespace, ts.Name, ts.Spec.Source.Type)
	started := time.Now()
	o := r.run(ctx, ts, targetsource.EffectiveTimeout(durationOr(ts.Spec.Timeout, time.Minute), interval))
	end := r.now()
	delay := r.record(ts, o, end, interval)
	// Counted before the status patch: the run happened whether or not its status lands, and whoever sees
	// the status then also sees the run counted.
	targetSourceSyncDuration.WithLabelValues(ts.Namespace, ts.Name, ts.Spec.Source.Type).Observe(time.Since(started).Seconds())
	targetSourceSyncTotal.WithLabelValues(ts.Namespace, ts.Name, ts.Spec.Source.Type, o.result).Inc()
	if err := kube.PatchStatusIfChanged(ctx, r.Client, before, ts); err != nil {
		return ctrl.Result{}, err
	}
	r.emitEvents(before, ts, o)
	return ctrl.Result{RequeueAfter: delay}, nil
}

// run fetches, maps, plans and converges. fetchTimeout (spec.timeout) bounds the fetch only; the writes get a
// budget sized by their number and the client's QPS, so a large first sync is not cut off by a timeout meant
// for a slow inventory.
func (r *TargetSourceReconciler) run(ctx context.Context, ts *gnmicv1alpha1.TargetSource, fetchTimeout time.Duration) outcome {
	fetchCtx, cancelFetch := context.WithTimeout(ctx, fetchTimeout)
	f, err := r.fetch(fetchCtx, ts)
	cancelFetch()
	if err != nil {
		var se *stallError
		if errors.As(err, &se) {
			return outcome{result: syncResultFailure, reason: se.reason, message: se.message, stalled: true, err: err}
		}
		reason := gnmicv1alpha1.ReasonFetchFailed
		if errors.Is(err, targetsource.ErrCrossOrigin) {
			// Its own reason: the fix is on the inventory or in spec.source.http.url, not a retry.
			reason = gnmicv1alpha1.ReasonCrossOrigin
		}
		return outcome{result: syncResultFailure, reason: reason, message: err.Error(), err: err}
	}
	tpl := targetsource.Template{Source: ts.Name, Port: int(ts.Spec.Target.Port), Profile: ts.Spec.Target.Profile,
		Labels: ts.Spec.Target.Labels}
	o := outcome{fetched: f, plan: targetsource.BuildPlan(tpl, f.devices)}
	if limit := ptrOr(ts.Spec.MaxTargets, 10000); limit > 0 && len(o.plan.Targets) > int(limit) {
		o.result, o.reason, o.capacity = syncResultHeld, gnmicv1alpha1.ReasonCapacityExceeded, true
		o.message = fmt.Sprintf("the source returned %d Targets, more than maxTargets (%d); nothing was changed",
			len(o.plan.Targets), limit)
		return o
	}
	// Every wanted Target may be applied and every managed one deleted: that bounds the writes.
	writeCtx, cancelWrites := context.WithTimeout(ctx,
		targetsource.SharedWriteBudget(len(o.plan.Targets)+int(ts.Status.Managed), r.WriteQPS, r.WriteSharers))
	defer cancelWrites()
	invalid := append(append([]targetsource.Failure{}, f.failures...), o.plan.Failures...)
	c, err := r.converge(writeCtx, ts, &o.plan, targetsource.GuardInput{
		Truncated:        f.truncated,
		Discovered:       len(f.devices) + len(f.failures),
		AllowEmptySource: ts.Spec.Prune.AllowEmptySource,
		MaxDeleteRatio:   int(ptrOr(ts.Spec.Prune.MaxDeleteRatio, 50)),
		Unnamed:          targetsource.Unnamed(invalid),
	}, targetsource.KeptTargets(ts.Name, invalid))
	o.converged = c
	if err != nil {
		o.result, o.reason, o.message, o.err = syncResultFailure, gnmicv1alpha1.ReasonApplyFailed, err.Error(), err
		return o
	}
	switch {
	case len(c.applyErrors) > 0 || len(c.deleteErrors) > 0:
		o.result, o.err = syncResultFailure, firstError(c)
		o.reason, o.message = gnmicv1alpha1.ReasonPartialFailure,
			fmt.Sprintf("%d Target writes failed: %v", len(c.applyErrors)+len(c.deleteErrors), o.err)
		if c.applied == 0 && len(o.plan.Targets) > 0 && len(c.applyErrors) == len(o.plan.Targets)-len(c.conflicted) {
			o.reason = gnmicv1alpha1.ReasonApplyFailed
		}
	case c.guard != "":
		o.result, o.reason = syncResultHeld, c.guard
		o.message = guardMessage(c, f)
	default:
		o.result, o.reason = syncResultSuccess, gnmicv1alpha1.ReasonSucceeded
		// Invalid devices keep their Targets and set Degraded (recordCounters); retrying sooner would not help:
		// the inventory's data or the mapping must change.
		o.message = fmt.Sprintf("%d Targets managed, %d written, %d pruned, %d invalid devices",
			c.managedAfter, c.applied, c.deleted, len(invalid))
	}
	return o
}

func guardMessage(c converged, f fetched) string {
	switch c.guard {
	case targetsource.GuardTruncated:
		return "deletions held: the source's answer is incomplete: " + f.truncatedReason
	case targetsource.GuardInvalidDevices:
		return fmt.Sprintf("deletions held: %d invalid devices have no name, and any Target about to be deleted may be one of them",
			c.unnamed)
	case targetsource.GuardEmptySource:
		return fmt.Sprintf("deletions held: the source returned no devices and prune.allowEmptySource is false (%d managed)", c.managedBefore)
	}
	return fmt.Sprintf("deletions held: the run would delete more than prune.maxDeleteRatio of %d managed Targets", c.managedBefore)
}

func firstError(c converged) error {
	names := make([]string, 0, len(c.applyErrors))
	for n := range c.applyErrors {
		names = append(names, n)
	}
	if len(names) > 0 {
		min := names[0]
		for _, n := range names {
			if n < min {
				min = n
			}
		}
		return fmt.Errorf("applying Target %s: %w", min, c.applyErrors[min])
	}
	return c.deleteErrors[0]
}

// record writes the outcome into status and returns the delay before the next run.
func (r *TargetSourceReconciler) record(ts *gnmicv1alpha1.TargetSource, o outcome, now time.Time, interval time.Duration) time.Duration {
	st := &ts.Status
	ready, reconciling := gnmicv1alpha1.TargetSourceConditionReady, gnmicv1alpha1.TargetSourceConditionReconciling
	st.LastSyncTime = &metav1.Time{Time: now}
	if o.result == syncResultFailure {
		st.ConsecutiveFailures++
		st.LastError = o.message
	} else {
		st.ConsecutiveFailures = 0
		st.LastError = ""
	}
	if o.err == nil || !o.stalled && o.reason != gnmicv1alpha1.ReasonFetchFailed && o.reason != gnmicv1alpha1.ReasonCrossOrigin {
		r.recordCounters(ts, o)
	}
	switch {
	case o.stalled:
		r.setCondition(ts, ready, metav1.ConditionFalse, o.reason, o.message)
		r.setCondition(ts, gnmicv1alpha1.TargetSourceConditionStalled, metav1.ConditionTrue, o.reason, o.message)
		r.setCondition(ts, reconciling, metav1.ConditionTrue, gnmicv1alpha1.ReasonRetryScheduled,
			"waiting for a change to the spec or a referenced object; retrying at the longest backoff")
	case o.result == syncResultFailure:
		meta.RemoveStatusCondition(&st.Conditions, gnmicv1alpha1.TargetSourceConditionStalled)
		r.setCondition(ts, ready, metav1.ConditionFalse, o.reason, o.message)
		rr := gnmicv1alpha1.ReasonRetryScheduled
		if o.reason == gnmicv1alpha1.ReasonPartialFailure {
			rr = gnmicv1alpha1.ReasonPartialFailure
		}
		r.setCondition(ts, reconciling, metav1.ConditionTrue, rr, fmt.Sprintf("retry %d scheduled", st.ConsecutiveFailures))
	default:
		meta.RemoveStatusCondition(&st.Conditions, gnmicv1alpha1.TargetSourceConditionStalled)
		status := metav1.ConditionFalse
		if o.result == syncResultSuccess {
			status = metav1.ConditionTrue
			st.LastSuccessfulSyncTime = &metav1.Time{Time: now}
			targetSourceLastSuccess.WithLabelValues(ts.Namespace, ts.Name).Set(float64(now.Unix()))
		}
		r.setCondition(ts, ready, status, o.reason, o.message)
		rr := gnmicv1alpha1.ReasonConverged
		if o.result == syncResultHeld {
			rr = o.reason
		}
		r.setCondition(ts, reconciling, metav1.ConditionFalse, rr, o.message)
	}
	failures := int(st.ConsecutiveFailures)
	if o.stalled {
		failures = 1 << 20 // waits at the cap
	}
	delay := targetsource.RetryDelay(interval, failures, r.rand)
	st.NextSyncTime = &metav1.Time{Time: now.Add(delay)}
	return delay
}

func (r *TargetSourceReconciler) recordCounters(ts *gnmicv1alpha1.TargetSource, o outcome) {
	st := &ts.Status
	failures := append(append([]targetsource.Failure{}, o.fetched.failures...), o.plan.Failures...)
	st.Discovered = int32(len(o.fetched.devices) + len(o.fetched.failures))
	st.Invalid = int32(len(failures))
	st.Sanitized = int32(o.plan.Sanitized)
	st.FailedDevices = nil
	for i, f := range failures {
		if i == maxFailedDevices {
			break
		}
		st.FailedDevices = append(st.FailedDevices, gnmicv1alpha1.FailedDevice{Name: f.Name, Reason: f.Reason})
	}
	if o.capacity {
		st.Pruned = 0
		st.SourceDigest = targetsource.Digest(o.plan.Targets)
	} else {
		c := o.converged
		st.Managed, st.Conflicted, st.Pruned = int32(c.managedAfter), int32(len(c.conflicted)), int32(c.deleted)
		st.SourceDigest = targetsource.Digest(o.plan.Targets)
		if len(c.conflicted) > 0 {
			r.setCondition(ts, gnmicv1alpha1.TargetSourceConditionConflicted, metav1.ConditionTrue, gnmicv1alpha1.ReasonNameConflict,
				fmt.Sprintf("%d wanted names are held by Targets this TargetSource does not manage: %s",
					len(c.conflicted), strings.Join(firstN(c.conflicted, 5), ", ")))
		} else {
			meta.RemoveStatusCondition(&st.Conditions, gnmicv1alpha1.TargetSourceConditionConflicted)
		}
	}
	if st.Invalid > 0 {
		r.setCondition(ts, gnmicv1alpha1.TargetSourceConditionDegraded, metav1.ConditionTrue, gnmicv1alpha1.ReasonInvalidDevices,
			fmt.Sprintf("%d devices could not become Targets (see status.failedDevices); their existing Targets are kept", st.Invalid))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, gnmicv1alpha1.TargetSourceConditionDegraded)
	}
	for state, n := range map[string]int32{"managed": st.Managed, "invalid": st.Invalid, "conflicted": st.Conflicted} {
		targetSourceTargets.WithLabelValues(ts.Namespace, ts.Name, state).Set(float64(n))
	}
}

func (r *TargetSourceReconciler) setCondition(ts *gnmicv1alpha1.TargetSource, typ string, status metav1.ConditionStatus, reason, msg string) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	meta.SetStatusCondition(&ts.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: ts.Generation,
	})
}

// emitEvents records events on first failure, stall, guard, conflict and first success (transitions only).
func (r *TargetSourceReconciler) emitEvents(before, after *gnmicv1alpha1.TargetSource, o outcome) {
	cond := func(ts *gnmicv1alpha1.TargetSource, typ string) *metav1.Condition {
		return meta.FindStatusCondition(ts.Status.Conditions, typ)
	}
	oldReady, newReady := cond(before, gnmicv1alpha1.TargetSourceConditionReady), cond(after, gnmicv1alpha1.TargetSourceConditionReady)
	switch {
	case o.stalled && !meta.IsStatusConditionTrue(before.Status.Conditions, gnmicv1alpha1.TargetSourceConditionStalled):
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, o.reason, "Stall", o.message)
	case o.result == syncResultFailure && after.Status.ConsecutiveFailures == 1:
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, o.reason, "Sync", o.message)
	case o.result == syncResultHeld && (oldReady == nil || oldReady.Reason != o.reason):
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, o.reason, "Prune", o.message)
	case o.result == syncResultSuccess && newReady != nil && (oldReady == nil || oldReady.Status != metav1.ConditionTrue):
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, gnmicv1alpha1.ReasonSucceeded, "Sync", o.message)
	}
	if c := cond(after, gnmicv1alpha1.TargetSourceConditionConflicted); c != nil &&
		(before.Status.Conflicted != after.Status.Conflicted || cond(before, gnmicv1alpha1.TargetSourceConditionConflicted) == nil) {
		r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, gnmicv1alpha1.ReasonNameConflict, "Apply", c.Message)
	}
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
