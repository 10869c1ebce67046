package rollout

import (
	"math"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ptr[T any](v T) *T { return &v }

func canarySpec(image string) Spec {
	return Spec{Image: image, Canary: true,
		Steps: []Step{{SetWeight: ptr[int32](25)}, {Pause: time.Minute}, {SetWeight: ptr[int32](50)},
			{Pause: time.Minute}, {SetWeight: ptr[int32](100)}, {Pause: 30 * time.Second}},
		Thresholds: Thresholds{MaxErrorRate: 0.02, MaxP99: 500 * time.Millisecond, MinRequestSample: 100}}
}

func cond(st Status, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestCanaryReplicas(t *testing.T) {
	for _, tc := range []struct {
		name           string
		weight, stable int32
		limit          *int32
		want           int32
		ok             bool
	}{
		{"weight 0 keeps one warm pod", 0, 10, nil, 1, true},
		{"ceil of 10% of 4", 10, 4, nil, 1, true},
		{"ceil of 30% of 4", 30, 4, nil, 2, true},
		{"half of 10", 50, 10, nil, 5, true},
		{"all of 7", 100, 7, nil, 7, true},
		{"stable at zero still gets one", 50, 0, nil, 1, true},
		{"quota caps", 100, 10, ptr[int32](3), 3, true},
		{"quota above need", 20, 10, ptr[int32](8), 2, true},
		{"no quota headroom", 20, 10, ptr[int32](0), 0, false},
		{"weight above 100 clamps", 150, 4, nil, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			n, ok := CanaryReplicas(tc.weight, tc.stable, tc.limit)
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(n).To(Equal(tc.want))
		})
	}
}

func TestPauseCapAndWindow(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		pause   time.Duration
		elapsed time.Duration
		want    time.Duration
		cap     time.Duration
	}{
		{"window grows from pause start", 2 * time.Minute, 90 * time.Second, 90 * time.Second, 6 * time.Minute},
		{"rounded up to whole seconds", 2 * time.Minute, 1500 * time.Millisecond, 2 * time.Second, 6 * time.Minute},
		{"at least one second", time.Minute, 0, time.Second, 3 * time.Minute},
		{"extension keeps growing", 2 * time.Minute, 5 * time.Minute, 5 * time.Minute, 6 * time.Minute},
		{"capped at 3x pause", 2 * time.Minute, 20 * time.Minute, 6 * time.Minute, 6 * time.Minute},
		{"capped at 15m", 10 * time.Minute, time.Hour, 15 * time.Minute, 15 * time.Minute},
		{"pause longer than 15m is not cut", 20 * time.Minute, time.Hour, 20 * time.Minute, 20 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(PauseCap(tc.pause)).To(Equal(tc.cap))
			spec := Spec{Steps: []Step{{SetWeight: ptr[int32](10)}, {Pause: tc.pause}}}
			st := Status{Stage: StageProgressing, CanaryStepIndex: 1, PauseStartedAt: start}
			w, ok := AnalysisWindow(spec, st, start.Add(tc.elapsed))
			g.Expect(ok).To(BeTrue())
			g.Expect(w).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	spec := Spec{Steps: []Step{{SetWeight: ptr[int32](10)}, {Pause: time.Minute}}}
	for _, st := range []Status{
		{Stage: StageProgressing, CanaryStepIndex: 0, PauseStartedAt: start},
		{Stage: StageProgressing, CanaryStepIndex: 1},
		{Stage: StageRollingBack, CanaryStepIndex: 1, PauseStartedAt: start},
		{Stage: StageProgressing, CanaryStepIndex: 2, PauseStartedAt: start},
	} {
		_, ok := AnalysisWindow(spec, st, start.Add(time.Minute))
		g.Expect(ok).To(BeFalse(), "no analysis outside a running pause: %+v", st)
	}
}

func TestJudge(t *testing.T) {
	th := Thresholds{MaxErrorRate: 0.02, MaxP99: 500 * time.Millisecond, MinRequestSample: 100}
	m := func(req, er, p99 float64) Analysis {
		return Analysis{Outcome: Measured, Window: 90 * time.Second, Requests: req, ErrorRate: er, P99: p99}
	}
	for _, tc := range []struct {
		name     string
		in       Analysis
		breached bool
		inconcl  bool
		reason   string
		msg      string
	}{
		{"healthy", m(500, 0.01, 0.2), false, false, ReasonAnalysisPassed,
			"error rate 1.00% ≤ 2.00%, p99 200ms ≤ 500ms over 1m30s (500 requests)"},
		{"at the thresholds passes", m(100, 0.02, 0.5), false, false, ReasonAnalysisPassed, ""},
		{"error rate breach names threshold and value", m(400, 0.075, 0.1), true, false, ReasonErrorRateExceeded,
			"error rate 7.50% over 1m30s (400 requests) exceeds maxErrorRate 2.00%"},
		{"latency breach names threshold and value", m(400, 0, 0.612), true, false, ReasonP99LatencyExceeded,
			"p99 latency 612ms over 1m30s (400 requests) exceeds maxP99LatencyMs 500ms"},
		{"latency above the highest bucket", m(400, 0, posInf()), true, false, ReasonP99LatencyExceeded, ""},
		{"below the sample gate nothing is judged", m(99, 1, 9), false, true, ReasonBelowMinSample,
			"99 of 100 required canary requests over 1m30s"},
		{"no requests", m(0, 0, nan), false, true, ReasonBelowMinSample, ""},
		{"NaN requests is no requests", m(nan, nan, nan), false, true, ReasonBelowMinSample, ""},
		{"p99 without data never passes", m(500, 0, nan), false, true, ReasonLatencyNoData, ""},
		{"error rate breach wins over missing p99", m(500, 0.5, nan), true, false, ReasonErrorRateExceeded, ""},
		{"NaN error rate never passes", m(500, nan, 0.1), false, true, ReasonBelowMinSample, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v := Judge(tc.in, th)
			g.Expect(v.Breached).To(Equal(tc.breached))
			g.Expect(v.Inconclusive).To(Equal(tc.inconcl))
			g.Expect(v.Reason).To(Equal(tc.reason))
			if tc.msg != "" {
				g.Expect(v.Message).To(Equal(tc.msg))
			}
		})
	}
}

func TestDecideIdle(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	obs := Observation{Now: now, StableImage: "v1", StableRolledOut: true, StableReplicas: 4,
		Route: RouteObservation{StableWeight: 100, Accepted: true}}
	for _, tc := range []struct {
		name        string
		spec        Spec
		st          Status
		wantActions []Action
		wantStage   Stage
		wantStable  string
		wantLatched bool
		wantRetried string
	}{
		{name: "first deployment adopts the image without a canary", spec: canarySpec("v1"),
			st: Status{}, wantStable: "v1"},
		{name: "same image does nothing", spec: canarySpec("v1"), st: Status{StableVersion: "v1"}, wantStable: "v1"},
		{name: "Recreate sets the stable image", spec: Spec{Image: "v2"}, st: Status{StableVersion: "v1"},
			wantActions: []Action{{Kind: ActionSetStableImage, Image: "v2"}}, wantStable: "v2"},
		{name: "new image starts a canary with one pod", spec: canarySpec("v2"), st: Status{StableVersion: "v1"},
			wantActions: []Action{{Kind: ActionEnsureCanary, Image: "v2", Replicas: 1}},
			wantStage:   StageProgressing, wantStable: "v1"},
		{name: "a rolled-back image is not retried", spec: canarySpec("v2"),
			st: Status{StableVersion: "v1", AbortedVersion: "v2"}, wantStable: "v1"},
		{name: "another image after a rollback starts fresh", spec: canarySpec("v3"),
			st:          Status{StableVersion: "v1", AbortedVersion: "v2", AbortLatched: true},
			wantActions: []Action{{Kind: ActionEnsureCanary, Image: "v3", Replicas: 1}},
			wantStage:   StageProgressing, wantStable: "v1"},
		{name: "a new retry-rollout value retries the rolled-back image", spec: func() Spec {
			s := canarySpec("v2")
			s.Retry = "2"
			return s
		}(), st: Status{Phase: PhaseRolloutFailed, StableVersion: "v1", AbortedVersion: "v2", Retried: "1"},
			wantActions: []Action{{Kind: ActionEnsureCanary, Image: "v2", Replicas: 1}},
			wantStage:   StageProgressing, wantStable: "v1", wantRetried: "2"},
		{name: "the retry-rollout value already acted on does not retry again", spec: func() Spec {
			s := canarySpec("v2")
			s.Retry = "2"
			return s
		}(), st: Status{Phase: PhaseRolloutFailed, StableVersion: "v1", AbortedVersion: "v2", Retried: "2"},
			wantStable: "v1", wantRetried: "2"},
		{name: "abort with no canary latches and does nothing", spec: func() Spec {
			s := canarySpec("v1")
			s.Abort = true
			return s
		}(), st: Status{StableVersion: "v1"}, wantStable: "v1", wantLatched: true},
		{name: "steps without a pause would never judge the canary: not started", spec: func() Spec {
			s := canarySpec("v2")
			s.Steps = []Step{{SetWeight: ptr[int32](50)}, {SetWeight: ptr[int32](100)}}
			return s
		}(), st: Status{StableVersion: "v1"}, wantStable: "v1"},
		{name: "no quota headroom does not start", spec: func() Spec {
			s := canarySpec("v2")
			s.CanaryReplicaLimit = ptr[int32](0)
			return s
		}(), st: Status{StableVersion: "v1"}, wantStable: "v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := Decide(tc.spec, tc.st, obs)
			g.Expect(d.Actions).To(Equal(tc.wantActions))
			g.Expect(d.Status.Stage).To(Equal(tc.wantStage))
			g.Expect(d.Status.StableVersion).To(Equal(tc.wantStable))
			g.Expect(d.Status.AbortLatched).To(Equal(tc.wantLatched))
			g.Expect(d.Status.Retried).To(Equal(tc.wantRetried))
			if tc.wantStage == StageProgressing {
				g.Expect(d.Status.Phase).To(Equal(PhaseRolloutInProgress))
				g.Expect(d.Status.CanaryVersion).To(Equal(tc.spec.Image))
				g.Expect(d.Status.AbortedVersion).To(BeEmpty())
				g.Expect(d.Status.BaselineReplicas).To(Equal(int32(4)))
			}
		})
	}
}

// A retry-rollout value set while a canary runs is consumed there: when that canary is rolled back, it is not
// retried by a value nobody set after the rollback.
func TestRetryValueSeenDuringACanaryIsConsumed(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := canarySpec("v2")
	spec.Retry = "stamped-by-ci"
	st := pausedStatus(now)
	d := Decide(spec, st, Observation{Now: now, StableImage: "v1", StableRolledOut: true, StableReplicas: 4})
	g.Expect(d.Status.Retried).To(Equal("stamped-by-ci"))

	// Later the canary was rolled back; the same value does not restart it.
	rolledBack := Status{Phase: PhaseRolloutFailed, StableVersion: "v1", AbortedVersion: "v2", Retried: d.Status.Retried}
	d = Decide(spec, rolledBack, Observation{Now: now, StableImage: "v1", StableRolledOut: true, StableReplicas: 4})
	g.Expect(d.Actions).To(BeEmpty())
	g.Expect(d.Status.AbortedVersion).To(Equal("v2"))
}

// pausedStatus is a canary at 25% in the pause step of canarySpec.
func pausedStatus(start time.Time) Status {
	return Status{Phase: PhaseRolloutInProgress, Stage: StageProgressing, StableVersion: "v1", CanaryVersion: "v2",
		CanaryWeight: 25, CanaryStepIndex: 1, PauseStartedAt: start, BaselineReplicas: 4}
}

func TestDecidePause(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := canarySpec("v2")
	measured := func(req, er, p99 float64) Analysis {
		return Analysis{Outcome: Measured, Window: time.Minute, Requests: req, ErrorRate: er, P99: p99}
	}
	for _, tc := range []struct {
		name      string
		policy    InsufficientPolicy
		st        Status
		elapsed   time.Duration
		analysis  Analysis
		wantStage Stage
		wantIndex int32
		wantPhase Phase
		// wantCond is "Type=Status/Reason" checked when set.
		wantCond    []string
		wantUnreach time.Duration // PromUnreachableSince relative to start; -1 means zero
		wantRequeue time.Duration
	}{
		{name: "healthy mid-pause waits for the pause end", elapsed: 20 * time.Second,
			analysis: measured(500, 0, 0.1), wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1,
			wantRequeue: 10 * time.Second},
		{name: "healthy at the pause end advances", elapsed: time.Minute, analysis: measured(500, 0, 0.1),
			wantStage: StageProgressing, wantIndex: 2, wantUnreach: -1,
			wantCond: []string{"RolloutHealthy=True/AnalysisPassed", "SampleInsufficient=False/SampleSufficient"}},
		{name: "breach mid-pause rolls back at once", elapsed: 5 * time.Second, analysis: measured(500, 0, 0.9),
			wantStage: StageRollingBack, wantIndex: 1, wantPhase: PhaseRolloutFailed, wantUnreach: -1,
			wantCond: []string{"RolloutHealthy=False/P99LatencyExceeded"}},
		{name: "few samples mid-pause just waits", elapsed: 30 * time.Second, analysis: measured(10, 0, 0.1),
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1, wantRequeue: 10 * time.Second},
		{name: "few samples after the pause extends it", elapsed: 90 * time.Second, analysis: measured(10, 0, 0.1),
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1,
			wantCond: []string{"SampleInsufficient=True/PauseExtended"}},
		{name: "few samples at the cap holds, never promotes", elapsed: 3 * time.Minute,
			analysis: measured(10, 0, 0.1), wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1,
			wantCond: []string{"SampleInsufficient=True/HeldInconclusive", "RolloutHealthy=Unknown/HeldInconclusive"}},
		{name: "held long after the cap still holds", elapsed: 3 * time.Hour, analysis: measured(10, 0, 0.1),
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1,
			wantCond: []string{"SampleInsufficient=True/HeldInconclusive"}},
		{name: "policy Rollback at the cap rolls back", policy: PolicyRollback, elapsed: 3 * time.Minute,
			analysis: measured(10, 0, 0.1), wantStage: StageRollingBack, wantIndex: 1, wantPhase: PhaseRolloutFailed,
			wantUnreach: -1, wantCond: []string{"RolloutHealthy=False/BelowMinRequestSample"}},
		{name: "enough samples during extension advance", elapsed: 2 * time.Minute, analysis: measured(300, 0, 0.1),
			wantStage: StageProgressing, wantIndex: 2, wantUnreach: -1},
		{name: "p99 with no data never advances", elapsed: 3 * time.Minute, analysis: measured(500, 0, nan),
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1,
			wantCond: []string{"SampleInsufficient=True/HeldInconclusive"}},
		{name: "a rejected query holds without touching SampleInsufficient", elapsed: 3 * time.Minute,
			analysis:  Analysis{Outcome: QueryFailed, Err: "bad_data: parse error"},
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1,
			wantCond: []string{"RolloutHealthy=Unknown/HeldInconclusive", "SampleInsufficient=/"}},
		{name: "unreachable starts the fail-safe timer", elapsed: 20 * time.Second,
			analysis:  Analysis{Outcome: Unreachable, Err: "connection refused"},
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: 20 * time.Second, wantRequeue: 10 * time.Second},
		{name: "unreachable within the timeout keeps the timer", elapsed: 70 * time.Second,
			st: func() Status {
				s := pausedStatus(start)
				s.PromUnreachableSince = start.Add(20 * time.Second)
				return s
			}(),
			analysis:  Analysis{Outcome: Unreachable, Err: "connection refused"},
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: 20 * time.Second, wantRequeue: 10 * time.Second},
		{name: "unreachable past the timeout rolls back", elapsed: 80 * time.Second,
			st: func() Status {
				s := pausedStatus(start)
				s.PromUnreachableSince = start.Add(20 * time.Second)
				return s
			}(),
			analysis:  Analysis{Outcome: Unreachable, Err: "connection refused"},
			wantStage: StageRollingBack, wantIndex: 1, wantPhase: PhaseRolloutFailed, wantUnreach: -1,
			wantCond: []string{"RolloutHealthy=False/PrometheusUnreachable"}},
		{name: "an answer resets the timer; empty is not unreachable", elapsed: 80 * time.Second,
			st: func() Status {
				s := pausedStatus(start)
				s.PromUnreachableSince = start.Add(20 * time.Second)
				return s
			}(),
			analysis:  measured(0, 0, nan),
			wantStage: StageProgressing, wantIndex: 1, wantUnreach: -1},
		{name: "not evaluated never advances", elapsed: time.Hour, wantStage: StageProgressing, wantIndex: 1,
			wantUnreach: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := spec
			s.InsufficientSamples = tc.policy
			st := tc.st
			if st.Stage == "" {
				st = pausedStatus(start)
			}
			obs := Observation{Now: start.Add(tc.elapsed), StableImage: "v1", StableRolledOut: true,
				StableReplicas: 4, Canary: CanaryObservation{Present: true, Image: "v2", Replicas: 1, RolledOut: true},
				Route: RouteObservation{StableWeight: 75, CanaryWeight: 25, Accepted: true}, Analysis: tc.analysis}
			d := Decide(s, st, obs)
			g.Expect(d.Status.Stage).To(Equal(tc.wantStage))
			if tc.wantStage == StageRollingBack {
				g.Expect(d.Actions).To(Equal([]Action{{Kind: ActionSetWeights, StableWeight: 100}}),
					"a rollback first moves traffic, nothing is deleted yet")
				g.Expect(d.Status.AbortedVersion).To(Equal("v2"))
			} else {
				g.Expect(d.Status.CanaryStepIndex).To(Equal(tc.wantIndex))
				if tc.wantIndex == 1 {
					g.Expect(d.Status.PauseStartedAt).To(Equal(start), "the pause start never moves")
				}
			}
			if tc.wantPhase != "" {
				g.Expect(d.Status.Phase).To(Equal(tc.wantPhase))
			}
			if tc.wantUnreach < 0 {
				g.Expect(d.Status.PromUnreachableSince.IsZero()).To(BeTrue())
			} else {
				g.Expect(d.Status.PromUnreachableSince).To(Equal(start.Add(tc.wantUnreach)))
			}
			if tc.wantRequeue != 0 {
				g.Expect(d.RequeueAfter).To(Equal(tc.wantRequeue))
			}
			for _, want := range tc.wantCond {
				typ, _, _ := strings.Cut(want, "=")
				c := cond(d.Status, typ)
				g.Expect(typ + "=" + string(c.Status) + "/" + c.Reason).To(Equal(want))
			}
		})
	}
}

func posInf() float64 { return math.Inf(1) }

// Timestamps are persisted at second precision; the state machine rounds them up so a stored value equals the one
// the decision used and the fail-safe never fires early.
func TestTimestampsRoundUpToWholeSeconds(t *testing.T) {
	g := NewWithT(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := canarySpec("v2")
	obs := Observation{Now: start.Add(1300 * time.Millisecond), StableImage: "v1", StableReplicas: 4,
		Canary: CanaryObservation{Present: true, Image: "v2", Replicas: 1, RolledOut: true},
		Route:  RouteObservation{StableWeight: 75, CanaryWeight: 25, Accepted: true}}
	st := pausedStatus(time.Time{})
	d := Decide(spec, st, obs)
	g.Expect(d.Status.PauseStartedAt).To(Equal(start.Add(2 * time.Second)))

	obs.Analysis = Analysis{Outcome: Unreachable, Err: "connection refused"}
	d = Decide(spec, d.Status, obs)
	g.Expect(d.Status.PromUnreachableSince).To(Equal(start.Add(2 * time.Second)))
	obs.Now = start.Add(61900 * time.Millisecond)
	g.Expect(Decide(spec, d.Status, obs).Status.Stage).To(Equal(StageProgressing), "59.9 s after the stamp")
	obs.Now = start.Add(62 * time.Second)
	g.Expect(Decide(spec, d.Status, obs).Status.Stage).To(Equal(StageRollingBack))
}
