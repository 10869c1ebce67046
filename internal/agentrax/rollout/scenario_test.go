package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestScenarioHealthyCanaryPromotes(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	w.runUntil(spec, 200, func() bool { return w.st.StableVersion == "v2" })

	g.Expect(w.st).To(Equal(Status{Phase: PhaseRunning, StableVersion: "v2", Conditions: w.st.Conditions}))
	g.Expect(cond(w.st, ConditionRolloutHealthy).Reason).To(Equal(ReasonPromoted))
	g.Expect(cond(w.st, ConditionSampleInsufficient).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(w.weights).To(Equal([]int32{25, 50, 100, 0}), "every step accepted, then traffic back to stable")
	g.Expect(w.canary.Present).To(BeFalse())
	g.Expect(w.stableImage).To(Equal("v2"))
	// The canary grows with its weight (25%, 50%, 100% of 4 stable replicas) before it gets the traffic.
	g.Expect(w.index("ScaleCanary x2")).To(BeNumerically("<", w.index("SetWeights 50/50")))
	g.Expect(w.index("ScaleCanary x4")).To(BeNumerically("<", w.index("SetWeights 0/100")))
	// Promotion order: stable takes the image, then traffic returns to stable, then the canary goes.
	g.Expect(w.log[w.index("SetStableImage"):]).To(Equal([]string{"SetStableImage", "SetWeights 100/0",
		"DeleteCanary", "RestoreHPA", "Register", "event Promoted"}))
	g.Expect(strings.Count(strings.Join(w.log, ","), "event AnalysisPassed")).To(Equal(3))
}

func TestScenarioLatencySpikeRollsBackBeforeFullWeight(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	// Healthy until the canary reaches 50%, then a 600 ms latency spike.
	w.analysis = func(win time.Duration) Analysis {
		a := healthy(50)(win)
		if w.st.CanaryWeight >= 50 {
			a.P99 = 0.6
		}
		return a
	}
	w.runUntil(spec, 200, func() bool { return w.idle() && w.st.Phase == PhaseRolloutFailed })

	g.Expect(w.weights).To(Equal([]int32{25, 50, 0}), "never reaches 100, stable gets all traffic back")
	g.Expect(w.stableImage).To(Equal("v1"))
	g.Expect(w.st.StableVersion).To(Equal("v1"))
	g.Expect(w.st.AbortedVersion).To(Equal("v2"))
	c := cond(w.st, ConditionRolloutHealthy)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(ReasonP99LatencyExceeded))
	g.Expect(c.Message).To(ContainSubstring("p99 latency 600ms"))
	g.Expect(c.Message).To(ContainSubstring("exceeds maxP99LatencyMs 500ms"))
	g.Expect(w.index("SetWeights 100/0")).To(BeNumerically("<", w.index("DeleteCanary")))

	// The same image is not tried again.
	n := len(w.log)
	for range 5 {
		w.tick(w.step(spec))
	}
	g.Expect(w.log[n:]).To(BeEmpty())
}

func TestScenarioErrorSpikeRollsBack(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.analysis = func(win time.Duration) Analysis {
		a := healthy(50)(win)
		a.ErrorRate = 0.3
		return a
	}
	w.runUntil(canarySpec("v2"), 100, func() bool { return w.idle() && w.st.Phase == PhaseRolloutFailed })
	g.Expect(w.weights).To(Equal([]int32{25, 0}))
	g.Expect(cond(w.st, ConditionRolloutHealthy).Message).To(Equal(
		"error rate 30.00% over 10s (500 requests) exceeds maxErrorRate 2.00%"))
}

func TestScenarioRestartResumesSameStepAndPauseStart(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	w.runUntil(spec, 100, func() bool { return w.st.CanaryStepIndex == 3 && !w.st.PauseStartedAt.IsZero() })
	persisted := w.st
	w.now = w.now.Add(20 * time.Second)

	// A restarted manager has nothing but the persisted status and what it observes.
	n := len(w.log)
	d := w.step(spec)
	g.Expect(d.Status.CanaryStepIndex).To(Equal(int32(3)))
	g.Expect(d.Status.PauseStartedAt).To(Equal(persisted.PauseStartedAt))
	g.Expect(d.Status.CanaryWeight).To(Equal(int32(50)))
	g.Expect(w.log[n:]).To(BeEmpty(), "no step is re-applied")
	win, ok := AnalysisWindow(spec, d.Status, w.now)
	g.Expect(ok).To(BeTrue())
	g.Expect(win).To(BeNumerically(">=", 20*time.Second), "the window still starts at the persisted pause start")

	w.tick(d)
	w.runUntil(spec, 100, func() bool { return w.st.StableVersion == "v2" })
	g.Expect(w.weights).To(Equal([]int32{25, 50, 100, 0}))
}

func TestScenarioPrometheusDownFailsSafe(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	var downAt time.Time
	w.analysis = func(win time.Duration) Analysis {
		if w.st.CanaryStepIndex == 3 && w.now.Sub(w.st.PauseStartedAt) >= 15*time.Second {
			if downAt.IsZero() {
				downAt = w.now
			}
			return Analysis{Outcome: Unreachable, Err: "dial tcp 127.0.0.1:9090: connect: connection refused"}
		}
		return healthy(50)(win)
	}
	w.runUntil(spec, 200, func() bool { return w.st.Stage == StageRollingBack })
	g.Expect(w.decidedAt.Sub(downAt)).To(BeNumerically(">=", DefaultFailsafeTimeout))
	g.Expect(w.decidedAt.Sub(downAt)).To(BeNumerically("<", DefaultFailsafeTimeout+DefaultAnalysisInterval))
	c := cond(w.st, ConditionRolloutHealthy)
	g.Expect(c.Reason).To(Equal(ReasonPrometheusDown))
	g.Expect(c.Message).To(ContainSubstring("connection refused"))
	w.runUntil(spec, 20, w.idle)
	g.Expect(w.weights).To(Equal([]int32{25, 50, 0}))
	g.Expect(w.st.Phase).To(Equal(PhaseRolloutFailed))
}

func TestScenarioLowTrafficHoldsInsteadOfPromoting(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	w.analysis = healthy(0.2) // 12 requests a minute: the 100-request gate needs 500 s of traffic
	start := w.now
	w.runUntil(spec, 1000, func() bool { return w.now.Sub(start) > 2*time.Hour })

	g.Expect(w.st.Stage).To(Equal(StageProgressing), "neither promoted nor rolled back")
	g.Expect(w.st.StableVersion).To(Equal("v1"))
	g.Expect(w.weights).To(Equal([]int32{25}))
	g.Expect(cond(w.st, ConditionSampleInsufficient).Reason).To(Equal(ReasonHeldInconclusive))
	g.Expect(cond(w.st, ConditionSampleInsufficient).Message).To(ContainSubstring(
		"36 of 100 required canary requests over 3m at the pause cap 3m; holding at 25%"))
	log := strings.Join(w.log, ",")
	g.Expect(strings.Count(log, "event PauseExtended")).To(Equal(1))
	g.Expect(strings.Count(log, "event SampleInsufficient")).To(Equal(1), "one event, not one per reconcile")

	// Traffic picks up: the held canary is judged again and carries on.
	w.analysis = healthy(50)
	w.runUntil(spec, 200, func() bool { return w.st.StableVersion == "v2" })
}

func TestScenarioAbortRollsBackOnlyTheCurrentCanary(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	w.runUntil(spec, 100, func() bool { return w.st.CanaryStepIndex == 1 && !w.st.PauseStartedAt.IsZero() })
	spec.Abort = true
	w.runUntil(spec, 20, func() bool { return w.idle() })
	g.Expect(w.st.Phase).To(Equal(PhaseRolloutFailed))
	g.Expect(w.st.AbortedVersion).To(Equal("v2"))
	g.Expect(cond(w.st, ConditionRolloutHealthy).Reason).To(Equal(ReasonAborted))
	g.Expect(w.weights).To(Equal([]int32{25, 0}))

	// abort is still true, but a new image gets a fresh canary that runs to the end.
	spec3 := canarySpec("v3")
	spec3.Abort = true
	w.runUntil(spec3, 200, func() bool { return w.st.StableVersion == "v3" })
	g.Expect(w.weights).To(Equal([]int32{25, 0, 25, 50, 100, 0}))
	g.Expect(w.st.AbortedVersion).To(BeEmpty(), "a new canary forgets the old failure, so v2 may be retried")

	// Cleared and set again, abort stops the next canary.
	spec4 := canarySpec("v4")
	w.runUntil(spec4, 100, func() bool { return w.st.CanaryStepIndex == 2 })
	g.Expect(w.st.AbortLatched).To(BeFalse())
	spec4.Abort = true
	w.runUntil(spec4, 20, w.idle)
	g.Expect(w.st.AbortedVersion).To(Equal("v4"))
	g.Expect(w.st.StableVersion).To(Equal("v3"))
}

func TestScenarioRouteNotAcceptedHoldsTheStep(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.gatewayDown = true
	spec := canarySpec("v2")
	for range 50 {
		w.tick(w.step(spec))
	}
	g.Expect(w.st.CanaryStepIndex).To(Equal(int32(0)))
	g.Expect(w.st.CanaryWeight).To(Equal(int32(0)), "a weight counts only once the route accepted it")
	g.Expect(w.st.PauseStartedAt.IsZero()).To(BeTrue())

	// Abort while the route does not accept: the canary stays until the rollback weights are accepted.
	spec.Abort = true
	for range 20 {
		w.tick(w.step(spec))
	}
	g.Expect(w.st.Stage).To(Equal(StageRollingBack))
	g.Expect(w.canary.Present).To(BeTrue())
	w.gatewayDown = false
	w.runUntil(spec, 20, w.idle)
	g.Expect(w.canary.Present).To(BeFalse())
}

func TestScenarioCanaryDeletedOutOfBandIsRepaired(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	w.runUntil(spec, 100, func() bool { return w.st.CanaryStepIndex == 3 && !w.st.PauseStartedAt.IsZero() })
	w.canary = CanaryObservation{}
	n := len(w.log)
	w.tick(w.step(spec))
	g.Expect(w.log[n:]).To(Equal([]string{"EnsureCanary v2 x2"}))
	w.runUntil(spec, 100, func() bool { return w.st.StableVersion == "v2" })
}

func TestScenarioImageChangeSupersedesCanary(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	w.runUntil(canarySpec("v2"), 100, func() bool { return w.st.CanaryStepIndex == 2 })
	// Back to the stable image: the canary is removed, nothing failed.
	w.runUntil(canarySpec("v1"), 20, w.idle)
	g.Expect(w.st.Phase).To(Equal(PhaseRunning))
	g.Expect(w.st.AbortedVersion).To(BeEmpty())
	g.Expect(cond(w.st, ConditionRolloutHealthy).Reason).To(Equal(ReasonSuperseded))
	// Then a newer image: a fresh canary.
	w.runUntil(canarySpec("v3"), 200, func() bool { return w.st.StableVersion == "v3" })
	g.Expect(slices.Contains(w.log, "EnsureCanary v3 x1")).To(BeTrue())
}

func TestScenarioCanaryFollowsStableHPAWithinQuota(t *testing.T) {
	g := NewWithT(t)
	w := newWorld(t)
	spec := canarySpec("v2")
	spec.CanaryReplicaLimit = ptr[int32](3)
	w.runUntil(spec, 100, func() bool { return w.st.CanaryStepIndex == 3 && !w.st.PauseStartedAt.IsZero() })
	g.Expect(w.canary.Replicas).To(Equal(int32(2)))
	w.stableReplicas = 10 // the HPA scales stable up during the pause
	w.tick(w.step(spec))
	g.Expect(w.canary.Replicas).To(Equal(int32(3)), "50% of 10 is 5, capped by the quota at 3")
	w.stableReplicas = 1 // traffic moved away: the baseline keeps the canary sized for what it serves
	w.tick(w.step(spec))
	g.Expect(w.canary.Replicas).To(Equal(int32(2)))
}
