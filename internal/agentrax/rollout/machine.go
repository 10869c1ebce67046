package rollout

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition and event reasons.
const (
	ReasonCanaryStarted        = "CanaryStarted"
	ReasonAnalysisPassed       = "AnalysisPassed"
	ReasonPromoted             = "Promoted"
	ReasonErrorRateExceeded    = "ErrorRateExceeded"
	ReasonP99LatencyExceeded   = "P99LatencyExceeded"
	ReasonPrometheusDown       = "PrometheusUnreachable"
	ReasonAborted              = "Aborted"
	ReasonSuperseded           = "Superseded"
	ReasonBelowMinSample       = "BelowMinRequestSample"
	ReasonLatencyNoData        = "LatencyNoData"
	ReasonQueryFailed          = "AnalysisQueryFailed"
	ReasonPauseExtended        = "PauseExtended"
	ReasonHeldInconclusive     = "HeldInconclusive"
	ReasonSampleSufficient     = "SampleSufficient"
	ReasonCanaryEnded          = "CanaryEnded"
	ReasonCanaryQuotaExhausted = "CanaryQuotaExhausted"
	ReasonNoSteps              = "NoPauseStep"
	ReasonRolledBack           = "RolledBack"
	ReasonRolloutRetried       = "RolloutRetried"
	// ReasonProgressDeadlineExceeded: a wait of the rollout outlasted spec.rollout.progressDeadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonRouteNotAccepted: the progress deadline passed before the Gateway accepted 100 % stable; the canary
	// was removed anyway.
	ReasonRouteNotAccepted = "RouteNotAccepted"
	// ReasonCanaryUnavailable: the canary Deployment was not available at an analysis of a pause.
	ReasonCanaryUnavailable = "CanaryUnavailable"
)

// AnalysisWindow is the range the canary's queries cover when the current step is a running pause: it grows from
// the pause start (so an extended pause gathers more samples), in whole seconds, at least 1 s, at most the
// extension cap (a held pause keeps judging the last cap-long window).
func AnalysisWindow(spec Spec, st Status, now time.Time) (time.Duration, bool) {
	if st.Stage != StageProgressing || st.PauseStartedAt.IsZero() || int(st.CanaryStepIndex) >= len(spec.Steps) ||
		st.CanaryStepIndex < 0 {
		return 0, false
	}
	step := spec.Steps[st.CanaryStepIndex]
	if step.SetWeight != nil {
		return 0, false
	}
	w := now.Sub(st.PauseStartedAt)
	w = ((w + time.Second - 1) / time.Second) * time.Second
	return min(max(w, time.Second), PauseCap(step.Pause)), true
}

// PauseCap is how long a pause may last while it waits for samples: min(3×pause, 15m), never below the pause
// itself (a pause longer than 15 m is not cut short).
func PauseCap(pause time.Duration) time.Duration {
	return max(pause, min(3*pause, MaxPauseExtension))
}

// Decide returns the next actions and the status to persist.
func Decide(spec Spec, st Status, obs Observation) Decision {
	d := &decider{spec: spec.withDefaults(), obs: obs}
	d.out.Status = st
	d.out.Status.Conditions = slices.Clone(st.Conditions)
	if !spec.Abort {
		d.st().AbortLatched = false
	}
	if o := obs.Analysis.Outcome; o == Measured || o == QueryFailed {
		// Any answer proves Prometheus reachable, even one this decision does not get to judge (say the canary
		// is being repaired): the fail-safe counts continuous unreachability only.
		d.st().PromUnreachableSince = time.Time{}
	}
	if st.Stage != StageIdle && spec.Retry != "" {
		// A retry value seen while a canary runs asks for nothing yet: consumed, so that a rollback of this canary
		// is not followed by a retry nobody asked for after it.
		d.st().Retried = spec.Retry
	}
	switch st.Stage {
	case StageProgressing:
		d.progressing()
	case StagePromoting:
		d.promoting()
	case StageRollingBack:
		d.rollingBack()
	default:
		d.idle()
	}
	return d.out
}

type decider struct {
	spec Spec
	obs  Observation
	out  Decision
}

func (d *decider) st() *Status { return &d.out.Status }

func (d *decider) act(a Action) { d.out.Actions = append(d.out.Actions, a) }

func (d *decider) event(warning bool, reason, format string, args ...any) {
	d.out.Events = append(d.out.Events, Event{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// wait asks to be woken after at most the analysis interval (watches on the Deployments and the route usually
// wake the controller earlier).
func (d *decider) wait(after time.Duration) {
	d.out.RequeueAfter = min(max(after, time.Second), d.spec.AnalysisInterval)
}

// condition sets a rollout condition and reports whether its status or reason changed, so events are emitted on
// transitions only and a held rollout does not flood the event stream.
func (d *decider) condition(typ string, status metav1.ConditionStatus, reason, msg string) bool {
	old := meta.FindStatusCondition(d.st().Conditions, typ)
	changed := old == nil || old.Status != status || old.Reason != reason
	meta.SetStatusCondition(&d.st().Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
		Message: msg, LastTransitionTime: metav1.NewTime(d.obs.Now)})
	return changed
}

func (d *decider) idle() {
	st := d.st()
	if d.spec.Abort {
		// Nothing runs to abort; latching here keeps a leftover abort from killing the next canary.
		st.AbortLatched = true
	}
	waiting := st.WaitingSince
	// Only the quota wait below keeps the timer; any other outcome ends that wait.
	st.WaitingSince = time.Time{}
	if d.spec.Retry != "" && d.spec.Retry != st.Retried {
		// A new retry-rollout value: the rolled-back image (if spec.image still names it) is tried again.
		st.Retried = d.spec.Retry
		if d.spec.Image == st.AbortedVersion {
			st.AbortedVersion = ""
			d.event(false, ReasonRolloutRetried, "retrying %s (retry-rollout %q)", d.spec.Image, d.spec.Retry)
		}
	}
	switch {
	case st.StableVersion == "":
		// First deployment: the stable Deployment is created with the image, there is nothing to compare with.
		st.StableVersion = d.spec.Image
	case d.spec.Image == st.StableVersion || d.spec.Image == "":
		if st.Phase == PhaseRolloutFailed {
			// spec.image went back to stable: the failed rollout is no longer pending.
			st.Phase = PhaseRunning
		}
		// The rolled-back image may be retried by setting it again.
		st.AbortedVersion = ""
	case !d.spec.Canary:
		d.act(Action{Kind: ActionSetStableImage, Image: d.spec.Image})
		st.StableVersion = d.spec.Image
		st.AbortedVersion = ""
	case d.spec.Image == st.AbortedVersion:
		// Rolled back before; retried once spec.image names another image, or on a new retry-rollout value.
	case !slices.ContainsFunc(d.spec.Steps, func(s Step) bool { return s.SetWeight == nil }):
		// Only pauses judge a canary: steps without one would promote it unevaluated.
		if d.condition(ConditionRolloutHealthy, metav1.ConditionUnknown, ReasonNoSteps,
			"strategy Canary needs at least one pause step to judge the canary; the canary is not started") {
			d.event(true, ReasonNoSteps, "strategy Canary needs at least one pause step; the canary is not started")
		}
	default:
		st.WaitingSince = waiting
		d.startCanary()
	}
}

func (d *decider) startCanary() {
	st := d.st()
	baseline := max(d.obs.StableReplicas, 1)
	n, ok := CanaryReplicas(0, baseline, d.spec.CanaryReplicaLimit)
	if !ok {
		if d.deadlinePassed() {
			// No canary exists yet: failing the rollout is all a rollback means here. Recording the image
			// releases its canary charge (the quota counts no canary for an aborted image).
			msg := fmt.Sprintf("no quota room for a canary of %s within the progress deadline %s",
				d.spec.Image, FormatDuration(d.spec.ProgressDeadline))
			st.Phase, st.AbortedVersion, st.WaitingSince = PhaseRolloutFailed, d.spec.Image, time.Time{}
			d.condition(ConditionRolloutHealthy, metav1.ConditionFalse, ReasonProgressDeadlineExceeded, msg)
			d.event(true, ReasonProgressDeadlineExceeded, "%s", msg)
			return
		}
		d.quotaExhausted()
		return
	}
	d.act(Action{Kind: ActionEnsureCanary, Image: d.spec.Image, Replicas: n})
	*st = Status{Phase: PhaseRolloutInProgress, Stage: StageProgressing, StableVersion: st.StableVersion,
		CanaryVersion: d.spec.Image, BaselineReplicas: baseline, AbortLatched: st.AbortLatched, Retried: st.Retried,
		Conditions: st.Conditions}
	d.condition(ConditionRolloutHealthy, metav1.ConditionUnknown, ReasonCanaryStarted, "canary analysis pending")
	d.condition(ConditionSampleInsufficient, metav1.ConditionFalse, ReasonCanaryStarted, "canary analysis pending")
	d.event(false, ReasonCanaryStarted, "canary %s started next to stable %s", d.spec.Image, st.StableVersion)
	d.out.Continue = true
}

// deadlinePassed starts the progress-deadline timer on the first wait and reports whether the current wait has
// outlasted the deadline. Callers that wait afterwards never sleep past the deadline (waitBounded).
func (d *decider) deadlinePassed() bool {
	st := d.st()
	if st.WaitingSince.IsZero() {
		st.WaitingSince = stamp(d.obs.Now)
	}
	return d.obs.Now.Sub(st.WaitingSince) >= d.spec.ProgressDeadline
}

// waitOrGiveUp is every wait of a running canary: it waits, bounded by the progress deadline, and rolls the
// canary back as failed once the deadline passed. It reports whether the rollout gave up.
func (d *decider) waitOrGiveUp(what string) bool {
	if d.deadlinePassed() {
		d.rollback(ReasonProgressDeadlineExceeded, true, "no progress for %s waiting for %s (canary %s)",
			FormatDuration(d.spec.ProgressDeadline), what, d.st().CanaryVersion)
		return true
	}
	d.waitBounded()
	return false
}

// waitBounded waits at most the analysis interval and never past the progress deadline.
func (d *decider) waitBounded() {
	left := d.spec.ProgressDeadline - d.obs.Now.Sub(d.st().WaitingSince)
	d.wait(min(d.spec.AnalysisInterval, left))
}

// progressed records progress: the deadline timer stops until the next wait.
func (d *decider) progressed() { d.st().WaitingSince = time.Time{} }

func (d *decider) quotaExhausted() {
	if d.condition(ConditionRolloutHealthy, metav1.ConditionUnknown, ReasonCanaryQuotaExhausted,
		"the tenant quota leaves no replica for the canary; the rollout waits") {
		d.event(true, ReasonCanaryQuotaExhausted, "the tenant quota leaves no replica for the canary")
	}
	d.waitBounded()
}

// canarySize is the canary's replica count for a weight, sized against the larger of the baseline and the
// current stable replica count.
func (d *decider) canarySize(weight int32) (int32, bool) {
	return CanaryReplicas(weight, max(d.st().BaselineReplicas, d.obs.StableReplicas), d.spec.CanaryReplicaLimit)
}

func (d *decider) progressing() {
	st := d.st()
	switch {
	case d.spec.Abort && !st.AbortLatched:
		st.AbortLatched = true
		d.rollback(ReasonAborted, true, "canary %s aborted by spec.rollout.abort", st.CanaryVersion)
		return
	case !d.spec.Canary || d.spec.Image != st.CanaryVersion:
		d.rollback(ReasonSuperseded, false, "canary %s superseded: spec.image is now %s", st.CanaryVersion,
			d.spec.Image)
		return
	}
	if st.CanaryStepIndex < 0 {
		// A corrupt index restarts the steps rather than skipping them.
		st.CanaryStepIndex, st.PauseStartedAt = 0, time.Time{}
	}
	if int(st.CanaryStepIndex) >= len(d.spec.Steps) {
		// Every step done (or the remaining steps were removed from the spec, the user's decision to finish).
		st.Stage = StagePromoting
		st.PauseStartedAt = time.Time{}
		d.out.Continue = true
		return
	}
	if c := d.obs.Canary; !c.Present || c.Image != st.CanaryVersion {
		// Self-healing: the canary was deleted or edited out of band.
		n, ok := d.canarySize(st.CanaryWeight)
		if !ok {
			if !d.waitOrGiveUp("quota room for the canary") {
				d.quotaExhausted()
			}
			return
		}
		if !d.waitOrGiveUp("the canary Deployment") {
			d.act(Action{Kind: ActionEnsureCanary, Image: st.CanaryVersion, Replicas: n})
		}
		return
	}
	step := d.spec.Steps[st.CanaryStepIndex]
	if step.SetWeight != nil {
		d.setWeight(*step.SetWeight)
		return
	}
	d.pause(step.Pause)
}

// setWeight scales the canary up before it gets traffic and down only after traffic left it; the step counts as
// applied only once the route reports Accepted for the new weights.
func (d *decider) setWeight(w int32) {
	st, obs := d.st(), d.obs
	w = min(max(w, 0), 100)
	n, ok := d.canarySize(w)
	if !ok {
		if !d.waitOrGiveUp("quota room for the canary") {
			d.quotaExhausted()
		}
		return
	}
	if obs.Canary.Replicas < n {
		if !d.waitOrGiveUp(fmt.Sprintf("%d available canary pods", n)) {
			d.act(Action{Kind: ActionScaleCanary, Replicas: n})
		}
		return
	}
	if !obs.Canary.RolledOut {
		d.waitOrGiveUp(fmt.Sprintf("%d available canary pods", n))
		return
	}
	if obs.Route.StableWeight != 100-w || obs.Route.CanaryWeight != w || !obs.Route.Accepted {
		if d.waitOrGiveUp(fmt.Sprintf("the route to accept weight %d%%", w)) {
			return
		}
		if obs.Route.StableWeight != 100-w || obs.Route.CanaryWeight != w {
			d.act(Action{Kind: ActionSetWeights, StableWeight: 100 - w, CanaryWeight: w})
		}
		return
	}
	if obs.Canary.Replicas > n {
		d.act(Action{Kind: ActionScaleCanary, Replicas: n})
	}
	d.progressed()
	st.CanaryWeight = w
	st.CanaryStepIndex++
	d.event(false, "WeightSet", "canary %s receives %d%% of traffic (step %d)", st.CanaryVersion, w, st.CanaryStepIndex)
	d.out.Continue = true
}

func (d *decider) pause(p time.Duration) {
	st, obs := d.st(), d.obs
	// A pause is not a wait: it ends by analysis. A timer left by recreating the canary stops here.
	d.progressed()
	if st.PauseStartedAt.IsZero() {
		st.PauseStartedAt = stamp(obs.Now)
		d.wait(p)
		return
	}
	if c := obs.Canary; c.Unavailable {
		// Checked at every analysis interval: the Gateway's 503s for a crashed canary are not in the app's own
		// metrics, so its analysis alone could pass a canary that no longer serves.
		d.rollback(ReasonCanaryUnavailable, true, "canary %s unavailable during the pause at %d%%: %d of %d replicas available",
			st.CanaryVersion, st.CanaryWeight, c.AvailableReplicas, c.Replicas)
		return
	}
	// The stable HPA keeps working; the canary follows it at the current weight.
	if n, ok := d.canarySize(st.CanaryWeight); ok && n != obs.Canary.Replicas {
		d.act(Action{Kind: ActionScaleCanary, Replicas: n})
	}
	elapsed := obs.Now.Sub(st.PauseStartedAt)
	a := obs.Analysis
	switch a.Outcome {
	case NotEvaluated:
		d.wait(d.spec.AnalysisInterval)
		return
	case Unreachable:
		if st.PromUnreachableSince.IsZero() {
			st.PromUnreachableSince = stamp(obs.Now)
		}
		down := max(obs.Now.Sub(st.PromUnreachableSince), 0)
		if down >= d.spec.FailsafeTimeout {
			d.rollback(ReasonPrometheusDown, true, "Prometheus unreachable for %s (fail-safe timeout %s): %s",
				FormatDuration(down.Truncate(time.Second)), FormatDuration(d.spec.FailsafeTimeout), a.Err)
			return
		}
		d.wait(d.spec.FailsafeTimeout - down)
		return
	}
	st.PromUnreachableSince = time.Time{}
	if a.Outcome == QueryFailed {
		d.inconclusive(p, elapsed, ReasonQueryFailed, false, "Prometheus rejected the analysis query: "+a.Err)
		return
	}
	v := Judge(a, d.spec.Thresholds)
	switch {
	case v.Breached:
		d.rollback(v.Reason, true, "%s", v.Message)
	case v.Inconclusive:
		d.inconclusive(p, elapsed, v.Reason, true, v.Message)
	case elapsed < p:
		d.wait(p - elapsed)
	default:
		d.condition(ConditionRolloutHealthy, metav1.ConditionTrue, ReasonAnalysisPassed, v.Message)
		d.condition(ConditionSampleInsufficient, metav1.ConditionFalse, ReasonSampleSufficient, v.Message)
		st.CanaryStepIndex++
		st.PauseStartedAt = time.Time{}
		d.event(false, ReasonAnalysisPassed, "step %d passed: %s", st.CanaryStepIndex, v.Message)
		d.out.Continue = true
	}
}

// inconclusive handles a pause that cannot judge the canary: wait out the pause, extend it up to the cap, then
// apply the policy. It never advances.
func (d *decider) inconclusive(p, elapsed time.Duration, reason string, sample bool, msg string) {
	capAt := PauseCap(p)
	typ, status := ConditionRolloutHealthy, metav1.ConditionUnknown
	if sample {
		typ, status = ConditionSampleInsufficient, metav1.ConditionTrue
	}
	switch {
	case elapsed < p:
		d.wait(p - elapsed)
	case elapsed < capAt:
		if d.condition(typ, status, ReasonPauseExtended, fmt.Sprintf("%s; pause extended up to %s",
			msg, FormatDuration(capAt))) {
			d.event(false, ReasonPauseExtended, "%s; pause extended up to %s", msg, FormatDuration(capAt))
		}
		d.wait(capAt - elapsed)
	case d.spec.InsufficientSamples == PolicyRollback:
		d.rollback(reason, true, "%s at the pause cap %s (policy Rollback)", msg, FormatDuration(capAt))
	default:
		held := fmt.Sprintf("%s at the pause cap %s; holding at %d%% as inconclusive (never promoted unevaluated)",
			msg, FormatDuration(capAt), d.st().CanaryWeight)
		changed := d.condition(typ, status, ReasonHeldInconclusive, held)
		if sample {
			changed = d.condition(ConditionRolloutHealthy, metav1.ConditionUnknown, ReasonHeldInconclusive, held) ||
				changed
		}
		if changed {
			d.event(true, typ, "%s", held)
		}
		d.wait(d.spec.AnalysisInterval)
	}
}

// rollback starts a rollback; failed marks it RolloutFailed and records the image so it is not retried.
func (d *decider) rollback(reason string, failed bool, format string, args ...any) {
	st := d.st()
	msg := fmt.Sprintf(format, args...)
	st.Stage = StageRollingBack
	st.PauseStartedAt = time.Time{}
	st.PromUnreachableSince = time.Time{}
	st.WaitingSince = time.Time{}
	if failed {
		st.Phase = PhaseRolloutFailed
		st.AbortedVersion = st.CanaryVersion
		d.condition(ConditionRolloutHealthy, metav1.ConditionFalse, reason, msg)
		d.event(true, reason, "rolling back: %s", msg)
	} else {
		d.condition(ConditionRolloutHealthy, metav1.ConditionUnknown, reason, msg)
		d.event(false, reason, "rolling back: %s", msg)
	}
	d.rollingBack()
}

// rollingBack returns all traffic (and, after a reverted promotion, the stable Deployment's image) to stable and
// waits until the route accepted it before removing the canary, so no request is ever routed to a Service without
// endpoints. The wait is bounded by the progress deadline: a Gateway that never accepts the route (allowedRoutes
// excluding the namespace, a parentRef typo) does not keep the canary and its quota charge for ever — past the
// deadline the canary is removed anyway and RouteNotAccepted says the route was never confirmed.
func (d *decider) rollingBack() {
	st, obs := d.st(), d.obs
	if d.spec.Abort {
		// Already rolling back: the abort is honoured, and latched so it does not also abort the next canary.
		st.AbortLatched = true
	}
	if st.StableVersion != "" && obs.StableImage != "" && obs.StableImage != st.StableVersion {
		// A reverted promotion: the stable Deployment goes back to the stable image. Its old pods still serve
		// (a rolling update keeps them until new ones are available), so traffic can return to it at once.
		d.act(Action{Kind: ActionSetStableImage, Image: st.StableVersion})
	}
	expired := d.deadlinePassed()
	if !d.routeAtStable() {
		if !expired {
			d.waitBounded()
			return
		}
		d.routeNotAccepted()
	}
	if obs.Canary.Present {
		d.act(Action{Kind: ActionDeleteCanary})
	}
	d.act(Action{Kind: ActionRestoreHPA})
	if st.Phase != PhaseRolloutFailed {
		st.Phase = PhaseRunning
	}
	d.finish(ReasonRolledBack, fmt.Sprintf("canary %s removed, stable %s serves all traffic",
		st.CanaryVersion, st.StableVersion))
}

// routeNotAccepted records that the progress deadline passed before the Gateway confirmed 100 % stable: the
// rollout ends anyway (the route's spec already sends nothing to the canary), saying so in a warning event and in
// the RolloutHealthy message, whose reason (why the rollout ended) is kept.
func (d *decider) routeNotAccepted() {
	st := d.st()
	msg := fmt.Sprintf("the route did not accept 100%% stable within the progress deadline %s; canary %s removed anyway",
		FormatDuration(d.spec.ProgressDeadline), st.CanaryVersion)
	if c := meta.FindStatusCondition(st.Conditions, ConditionRolloutHealthy); c != nil {
		d.condition(ConditionRolloutHealthy, c.Status, c.Reason, c.Message+"; "+msg)
	} else {
		d.condition(ConditionRolloutHealthy, metav1.ConditionUnknown, ReasonRouteNotAccepted, msg)
	}
	d.event(true, ReasonRouteNotAccepted, "%s", msg)
	st.CanaryWeight = 0
}

// promoting: the stable Deployment takes the canary's image and finishes rolling out while the canary still
// serves, only then does traffic return to stable and the canary go away. The whole stage is bounded by the
// progress deadline, and abort and a new image are honoured in it: a stable that cannot roll out (a surge pod
// that is never scheduled) or an abort reverts the promotion — the stable Deployment goes back to the stable
// image and the rollout ends RolloutFailed — and a new image reverts it without failing, so the new image starts
// its own canary.
func (d *decider) promoting() {
	st, obs := d.st(), d.obs
	switch {
	case d.spec.Abort && !st.AbortLatched:
		st.AbortLatched = true
		d.rollback(ReasonAborted, true, "promotion of canary %s aborted by spec.rollout.abort", st.CanaryVersion)
		return
	case !d.spec.Canary || d.spec.Image != st.CanaryVersion:
		d.rollback(ReasonSuperseded, false, "promotion of canary %s superseded: spec.image is now %s",
			st.CanaryVersion, d.spec.Image)
		return
	}
	expired := d.deadlinePassed()
	if obs.StableImage != st.CanaryVersion || !obs.StableRolledOut {
		if expired {
			d.rollback(ReasonProgressDeadlineExceeded, true,
				"no progress for %s waiting for the stable Deployment to roll out %s; promotion reverted to %s",
				FormatDuration(d.spec.ProgressDeadline), st.CanaryVersion, st.StableVersion)
			return
		}
		if obs.StableImage != st.CanaryVersion {
			d.act(Action{Kind: ActionSetStableImage, Image: st.CanaryVersion})
		}
		d.waitBounded()
		return
	}
	if !d.routeAtStable() {
		if !expired {
			d.waitBounded()
			return
		}
		// The stable runs the new image and is rolled out: the promotion is done but for the Gateway's word.
		d.routeNotAccepted()
	}
	if obs.Canary.Present {
		d.act(Action{Kind: ActionDeleteCanary})
	}
	d.act(Action{Kind: ActionRestoreHPA})
	d.act(Action{Kind: ActionRegister})
	st.StableVersion = st.CanaryVersion
	st.Phase = PhaseRunning
	d.condition(ConditionRolloutHealthy, metav1.ConditionTrue, ReasonPromoted, "canary "+st.CanaryVersion+" promoted")
	d.finish(ReasonPromoted, fmt.Sprintf("%s promoted to stable", st.CanaryVersion))
}

// routeAtStable sends all traffic to stable and reports whether the route has accepted that; the caller waits.
func (d *decider) routeAtStable() bool {
	r := d.obs.Route
	if r.StableWeight != 100 || r.CanaryWeight != 0 {
		d.act(Action{Kind: ActionSetWeights, StableWeight: 100, CanaryWeight: 0})
		return false
	}
	if !r.Accepted {
		return false
	}
	d.st().CanaryWeight = 0
	return true
}

func (d *decider) finish(reason, msg string) {
	st := d.st()
	d.condition(ConditionSampleInsufficient, metav1.ConditionFalse, ReasonCanaryEnded, "no canary running")
	d.event(false, reason, "%s", msg)
	*st = Status{Phase: st.Phase, StableVersion: st.StableVersion, AbortedVersion: st.AbortedVersion,
		AbortLatched: st.AbortLatched, Retried: st.Retried, Conditions: st.Conditions}
	d.out.RequeueAfter = 0
}

// stamp rounds a timestamp the state machine persists UP to a whole second. The API server stores metav1.Time at
// second precision; truncation would start a pause or the fail-safe timer up to a second early (a rollback
// before the timeout), while rounding up makes the stored value exactly the one this decision used, so a
// restarted manager computes the same windows and deadlines.
func stamp(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}
