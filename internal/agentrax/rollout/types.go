// Package rollout decides, step by step, what a metric-gated canary rollout does next. Decide is a pure function of
// the spec, the persisted status and what the controller observed; the controller carries out the returned actions
// in order and persists the returned status only when all of them succeeded, so every decision can be replayed
// after a crash and a restarted manager resumes where the status says it stopped.
package rollout

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// Step is one rollout step: exactly one of SetWeight and Pause (spec.rollout.steps[]).
type Step struct {
	// SetWeight is the canary's share of traffic in percent, 0..100.
	SetWeight *int32
	// Pause is how long the canary is observed at its current weight before the next step.
	Pause time.Duration
}

// Thresholds roll a canary back (spec.rollout.rollback, parsed).
type Thresholds struct {
	// MaxErrorRate is the highest tolerated share of 5xx responses, 0..1 (quota.ParseErrorRate reads "2%", the
	// one rule admission and the controller share).
	MaxErrorRate float64
	// MaxP99 is the highest tolerated 99th-percentile latency (maxP99LatencyMs).
	MaxP99 time.Duration
	// MinRequestSample is how many canary requests a window needs before the thresholds are judged.
	MinRequestSample int64
}

// InsufficientPolicy says what happens when the pause extension cap is reached without enough samples.
type InsufficientPolicy string

// Policies.
const (
	// PolicyHold keeps the canary at its weight, marks it inconclusive and keeps evaluating; it never promotes an
	// unevaluated canary. The default.
	PolicyHold InsufficientPolicy = "Hold"
	// PolicyRollback rolls the canary back as failed.
	PolicyRollback InsufficientPolicy = "Rollback"
)

// Defaults.
const (
	// DefaultFailsafeTimeout is how long Prometheus may stay unreachable during a pause before the canary is
	// rolled back (--prometheus-failsafe-timeout).
	DefaultFailsafeTimeout = 60 * time.Second
	// DefaultAnalysisInterval is how often a pause re-evaluates the canary.
	DefaultAnalysisInterval = 10 * time.Second
	// DefaultProgressDeadline bounds every wait of a rollout: the API's default of spec.rollout.progressDeadline
	// (one value, also for objects stored before the field).
	DefaultProgressDeadline = agentraxv1alpha1.DefaultProgressDeadline
	// MaxPauseExtension bounds how long a pause may be extended waiting for samples: min(3×pause, 15m).
	MaxPauseExtension = 15 * time.Minute
)

// Spec is what the rollout needs from the AgentDeployment spec and the manager's flags.
type Spec struct {
	// Image is spec.image.
	Image string
	// Canary is true for strategy Canary; otherwise image changes go straight to the stable Deployment.
	Canary bool
	Steps  []Step
	// Thresholds from spec.rollout.rollback.
	Thresholds Thresholds
	// Abort is spec.rollout.abort: roll back the canary that is running when it is seen.
	Abort bool
	// InsufficientSamples is the policy at the extension cap; empty means PolicyHold.
	InsufficientSamples InsufficientPolicy
	// FailsafeTimeout; zero means DefaultFailsafeTimeout.
	FailsafeTimeout time.Duration
	// AnalysisInterval; zero means DefaultAnalysisInterval.
	AnalysisInterval time.Duration
	// ProgressDeadline bounds every wait of the rollout (canary pods available, route accepted, quota room);
	// zero means DefaultProgressDeadline.
	ProgressDeadline time.Duration
	// Retry is the agentrax.io/retry-rollout annotation: a value other than Status.Retried retries AbortedVersion.
	Retry string
	// CanaryReplicaLimit is the most canary replicas the tenant quota allows (its headroom plus what the canary
	// already holds); nil means no limit. Zero holds the rollout before traffic reaches a canary without pods.
	CanaryReplicaLimit *int32
}

func (s Spec) withDefaults() Spec {
	if s.InsufficientSamples == "" {
		s.InsufficientSamples = PolicyHold
	}
	if s.FailsafeTimeout <= 0 {
		s.FailsafeTimeout = DefaultFailsafeTimeout
	}
	if s.AnalysisInterval <= 0 {
		s.AnalysisInterval = DefaultAnalysisInterval
	}
	if s.ProgressDeadline <= 0 {
		s.ProgressDeadline = DefaultProgressDeadline
	}
	return s
}

// Stage is where in the rollout the state machine is. It is persisted with the status: promotion and rollback
// take several reconciles, and the observations alone cannot tell a canary being promoted from one being removed.
type Stage string

// Stages.
const (
	// StageIdle: no canary; the stable Deployment runs StableVersion.
	StageIdle Stage = ""
	// StageProgressing: the canary walks through the steps.
	StageProgressing Stage = "Progressing"
	// StagePromoting: every step passed; the stable Deployment is taking the canary's image.
	StagePromoting Stage = "Promoting"
	// StageRollingBack: traffic returns to stable, then the canary is removed.
	StageRollingBack Stage = "RollingBack"
)

// Phase values the rollout sets; they match AgentDeployment status.phase.
type Phase string

// Phases the rollout sets.
const (
	// PhaseRunning: no canary runs, or the last one was promoted or superseded.
	PhaseRunning Phase = "Running"
	// PhaseRolloutInProgress: a canary runs.
	PhaseRolloutInProgress Phase = "RolloutInProgress"
	// PhaseRolloutFailed: the last canary was rolled back (breach, fail-safe, abort, progress deadline).
	PhaseRolloutFailed Phase = "RolloutFailed"
)

// Condition types the rollout manages.
const (
	// ConditionSampleInsufficient is True while a pause lacks the samples (or data) to judge the canary.
	ConditionSampleInsufficient = "SampleInsufficient"
	// ConditionRolloutHealthy is True when the last judgement passed or the canary was promoted, False with the
	// breached threshold and observed value when it was rolled back, Unknown while nothing could be judged.
	ConditionRolloutHealthy = "RolloutHealthy"
)

// Status is the persisted rollout state (AgentDeployment status fields, plus Stage, AbortedVersion and
// AbortLatched which the CRD has to carry for re-entrancy).
type Status struct {
	Phase           Phase
	Stage           Stage
	StableVersion   string
	CanaryVersion   string
	CanaryWeight    int32
	CanaryStepIndex int32
	// PauseStartedAt is when the current pause step began; zero outside a pause.
	PauseStartedAt time.Time
	// PromUnreachableSince starts the fail-safe timer; zero while Prometheus answers.
	PromUnreachableSince time.Time
	// WaitingSince is when the rollout began waiting on something outside it (canary pods, the route, quota room)
	// without progress; the progress deadline counts from it. Zero while nothing is awaited.
	WaitingSince time.Time
	// BaselineReplicas is the stable replica count when the canary started: the canary is sized against it so
	// that the stable HPA scaling down as traffic moves away does not shrink the canary taking that traffic.
	BaselineReplicas int32
	// AbortedVersion is the image whose canary was last rolled back (abort, breach, fail-safe, deadline). It is
	// not tried again while spec.image keeps naming it; once spec.image names another image (the stable one
	// included), setting it again retries it.
	AbortedVersion string
	// Retried is the Spec.Retry value last acted on.
	Retried string
	// AbortLatched records that the current spec.rollout.abort=true has been acted on, so it does not also abort
	// the next canary (the upstream's abort stayed armed until cleared). Cleared when abort is seen false.
	AbortLatched bool
	// Conditions holds the rollout's conditions (SampleInsufficient, RolloutHealthy).
	Conditions []metav1.Condition
}

// Observation is what the controller saw this reconcile.
type Observation struct {
	Now time.Time
	// StableImage is the stable Deployment's container image (spec).
	StableImage string
	// StableRolledOut: the stable Deployment's latest generation is fully updated and available.
	StableRolledOut bool
	// StableReplicas is the stable Deployment's current replica count (moved by the HPA).
	StableReplicas int32
	Canary         CanaryObservation
	Route          RouteObservation
	// Analysis is the evaluation of the canary over AnalysisWindow; zero (NotEvaluated) when none was run.
	Analysis Analysis
}

// CanaryObservation describes the canary Deployment.
type CanaryObservation struct {
	Present   bool
	Image     string
	Replicas  int32
	RolledOut bool
	// Unavailable: no canary replica is available (its pods stopped passing their readiness probe, or crashed), or
	// a canary pod's container crashed (restarted or in CrashLoopBackOff, and not ready).
	Unavailable bool
	// AvailableReplicas is the canary Deployment's available replica count, for messages.
	AvailableReplicas int32
}

// RouteObservation describes the HTTPRoute's weights as written in its spec, and whether every parent reported
// Accepted=True for the route's current generation.
type RouteObservation struct {
	StableWeight int32
	CanaryWeight int32
	Accepted     bool
}

// Outcome classifies an analysis.
type Outcome int

// Outcomes.
const (
	// NotEvaluated: no analysis was run this reconcile.
	NotEvaluated Outcome = iota
	// Measured: Prometheus answered every query (values may be NaN: no data).
	Measured
	// Unreachable: Prometheus could not be reached, timed out or answered with a server error.
	Unreachable
	// QueryFailed: Prometheus rejected a query (bad_data, execution error) — a configuration problem, not an outage.
	QueryFailed
)

// Analysis is the result of evaluating the canary's queries.
type Analysis struct {
	Outcome Outcome
	// Window the queries covered.
	Window time.Duration
	// Requests in the window.
	Requests float64
	// ErrorRate is the share of 5xx responses, 0..1; NaN when unknown.
	ErrorRate float64
	// P99 latency in seconds; NaN when there was no data.
	P99 float64
	// Err describes an Unreachable or QueryFailed outcome.
	Err string
}

// ActionKind names what the controller must do.
type ActionKind string

// Actions.
const (
	// ActionEnsureCanary creates or repairs the canary Deployment and Service with Image and Replicas.
	ActionEnsureCanary ActionKind = "EnsureCanary"
	// ActionScaleCanary sets the canary Deployment's replicas.
	ActionScaleCanary ActionKind = "ScaleCanary"
	// ActionSetWeights writes StableWeight/CanaryWeight into the HTTPRoute's backendRefs.
	ActionSetWeights ActionKind = "SetWeights"
	// ActionSetStableImage sets the stable Deployment's image.
	ActionSetStableImage ActionKind = "SetStableImage"
	// ActionDeleteCanary deletes the canary Deployment and Service.
	ActionDeleteCanary ActionKind = "DeleteCanary"
	// ActionRestoreHPA reconciles the stable HPA to the spec, returning the canary's quota headroom to it.
	ActionRestoreHPA ActionKind = "RestoreHPA"
	// ActionRegister re-registers the agent with the MCP registry (a new image may offer new tools).
	ActionRegister ActionKind = "Register"
)

// Action is one thing for the controller to do; fields are set according to Kind.
type Action struct {
	Kind         ActionKind
	Image        string
	Replicas     int32
	StableWeight int32
	CanaryWeight int32
}

// Event is a Kubernetes event to record.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Decision is what Decide returns.
type Decision struct {
	// Actions to carry out in order; each is idempotent.
	Actions []Action
	// Status to persist once every action succeeded.
	Status Status
	Events []Event
	// Continue asks for an immediate new decision (the status moved on and the next stage can act at once).
	Continue bool
	// RequeueAfter is when to decide again if no watch fires first; zero when nothing is pending.
	RequeueAfter time.Duration
}

// CanaryReplicas sizes the canary for a weight: ceil(weight% × stable replicas), at least 1 (a canary with a
// share of traffic needs a pod; at weight 0 one warm pod is kept), at most limit. ok is false when the limit
// leaves no room for even one pod.
func CanaryReplicas(weight, stable int32, limit *int32) (n int32, ok bool) {
	w := min(max(int64(weight), 0), 100)
	r := (w*int64(max(stable, 0)) + 99) / 100
	r = max(r, 1)
	if limit != nil {
		if *limit < 1 {
			return 0, false
		}
		r = min(r, int64(*limit))
	}
	return int32(r), true
}
