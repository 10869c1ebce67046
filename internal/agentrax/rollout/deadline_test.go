package rollout

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// Every wait of a rollout ends at spec.rollout.progressDeadline: the deadline counts from the first reconcile that
// found the rollout waiting, progress resets it, and past it the canary is rolled back as failed.
func TestProgressDeadlineBoundsEveryWait(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const deadline = 5 * time.Minute
	running := func(weight, step int32, waitingSince time.Time) Status {
		return Status{Phase: PhaseRolloutInProgress, Stage: StageProgressing, StableVersion: "v1", CanaryVersion: "v2",
			CanaryWeight: weight, CanaryStepIndex: step, BaselineReplicas: 4, WaitingSince: waitingSince}
	}
	unavailable := CanaryObservation{Present: true, Image: "v2", Replicas: 1}
	available := CanaryObservation{Present: true, Image: "v2", Replicas: 1, RolledOut: true}
	atStable := RouteObservation{StableWeight: 100, Accepted: true}
	for _, tc := range []struct {
		name      string
		st        Status
		limit     *int32
		obs       Observation
		rollback  bool
		waitSince time.Time
	}{
		{name: "canary pods unavailable: the timer starts", st: running(0, 0, time.Time{}),
			obs: Observation{Now: t0, Canary: unavailable, Route: atStable}, waitSince: t0},
		{name: "canary pods unavailable before the deadline: waits", st: running(0, 0, t0),
			obs: Observation{Now: t0.Add(deadline - time.Second), Canary: unavailable, Route: atStable}, waitSince: t0},
		{name: "canary pods unavailable at the deadline: rolls back", st: running(0, 0, t0),
			obs: Observation{Now: t0.Add(deadline), Canary: unavailable, Route: atStable}, rollback: true},
		{name: "route never accepts the weights: rolls back", st: running(0, 0, t0),
			obs: Observation{Now: t0.Add(deadline), Canary: available,
				Route: RouteObservation{StableWeight: 75, CanaryWeight: 25}}, rollback: true},
		{name: "no quota room for the canary: rolls back", st: running(0, 0, t0), limit: ptr[int32](0),
			obs: Observation{Now: t0.Add(deadline), Canary: unavailable, Route: atStable}, rollback: true},
		{name: "canary deleted and not recreated in time: rolls back", st: running(25, 2, t0),
			obs: Observation{Now: t0.Add(deadline), Route: atStable}, rollback: true},
		{name: "progress stops the timer", st: running(0, 0, t0),
			obs: Observation{Now: t0.Add(deadline - time.Second), Canary: available,
				Route: RouteObservation{StableWeight: 75, CanaryWeight: 25, Accepted: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := canarySpec("v2")
			spec.ProgressDeadline = deadline
			spec.CanaryReplicaLimit = tc.limit
			d := Decide(spec, tc.st, tc.obs)
			if !tc.rollback {
				g.Expect(d.Status.Stage).To(Equal(StageProgressing))
				g.Expect(d.Status.WaitingSince).To(Equal(tc.waitSince))
				if !tc.waitSince.IsZero() {
					left := deadline - tc.obs.Now.Sub(tc.waitSince)
					g.Expect(d.RequeueAfter).To(BeNumerically("<=", max(left, time.Second)),
						"never sleeps past the deadline")
				}
				return
			}
			g.Expect(d.Status.Phase).To(Equal(PhaseRolloutFailed))
			g.Expect(d.Status.AbortedVersion).To(Equal("v2"), "the failed image releases its canary charge")
			g.Expect(cond(d.Status, ConditionRolloutHealthy).Reason).To(Equal(ReasonProgressDeadlineExceeded))
			g.Expect(d.Events).To(ContainElement(HaveField("Reason", ReasonProgressDeadlineExceeded)))
			if tc.obs.Route.StableWeight != 100 || !tc.obs.Route.Accepted {
				g.Expect(d.Actions).To(Equal([]Action{{Kind: ActionSetWeights, StableWeight: 100}}),
					"traffic returns to stable before the canary is removed")
				g.Expect(d.Status.Stage).To(Equal(StageRollingBack))
				return
			}
			want := []Action{{Kind: ActionRestoreHPA}}
			if tc.obs.Canary.Present {
				want = append([]Action{{Kind: ActionDeleteCanary}}, want...)
			}
			g.Expect(d.Actions).To(Equal(want), "the route is at stable: the canary goes and its charge is released")
			g.Expect(d.Status.Stage).To(Equal(StageIdle))
		})
	}
}

func TestProgressDeadlineDefaultsToTenMinutes(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := Status{Phase: PhaseRolloutInProgress, Stage: StageProgressing, StableVersion: "v1", CanaryVersion: "v2",
		BaselineReplicas: 4, WaitingSince: t0}
	obs := Observation{Now: t0.Add(10*time.Minute - time.Second),
		Canary: CanaryObservation{Present: true, Image: "v2", Replicas: 1}, Route: RouteObservation{StableWeight: 100, Accepted: true}}
	g.Expect(Decide(canarySpec("v2"), st, obs).Status.Stage).To(Equal(StageProgressing))
	obs.Now = t0.Add(10 * time.Minute)
	g.Expect(Decide(canarySpec("v2"), st, obs).Status.Phase).To(Equal(PhaseRolloutFailed))
}

// Before a canary exists, the only wait is for quota room: past the deadline the rollout fails without a canary
// and the image is recorded, which releases the canary charge.
func TestProgressDeadlineWaitingForQuotaBeforeTheCanary(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	spec := canarySpec("v2")
	spec.ProgressDeadline = time.Minute
	spec.CanaryReplicaLimit = ptr[int32](0)
	st := Status{Phase: PhaseRunning, StableVersion: "v1"}
	d := Decide(spec, st, Observation{Now: t0, StableReplicas: 4})
	g.Expect(d.Status.WaitingSince).To(Equal(t0))
	g.Expect(d.RequeueAfter).To(BeNumerically(">", 0))
	d = Decide(spec, d.Status, Observation{Now: t0.Add(time.Minute), StableReplicas: 4})
	g.Expect(d.Actions).To(BeEmpty())
	g.Expect(d.Status.Phase).To(Equal(PhaseRolloutFailed))
	g.Expect(d.Status.AbortedVersion).To(Equal("v2"))
	g.Expect(d.Status.WaitingSince.IsZero()).To(BeTrue())
	g.Expect(cond(d.Status, ConditionRolloutHealthy).Reason).To(Equal(ReasonProgressDeadlineExceeded))
}

// A typo is fixed by fixing the typo: a new image mid-rollout restarts the canary at step 0 (after traffic is back
// on stable), and a rolled-back image is retried once spec.image named another image and names it again.
func TestImageChangesDuringAndAfterARollout(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	atStable := RouteObservation{StableWeight: 100, Accepted: true}
	for _, tc := range []struct {
		name  string
		image string
		st    Status
		obs   Observation
		want  func(g Gomega, d Decision)
	}{
		{name: "new image mid-rollout: the old canary goes, then the new one starts at step 0", image: "v3",
			st: Status{Phase: PhaseRolloutInProgress, Stage: StageProgressing, StableVersion: "v1",
				CanaryVersion: "registry.invalid/v2", CanaryStepIndex: 0, WaitingSince: t0},
			obs: Observation{Now: t0.Add(time.Second), Canary: CanaryObservation{Present: true, Image: "registry.invalid/v2",
				Replicas: 1}, Route: atStable},
			want: func(g Gomega, d Decision) {
				g.Expect(d.Actions).To(HaveExactElements(HaveField("Kind", ActionDeleteCanary), HaveField("Kind", ActionRestoreHPA)))
				g.Expect(d.Status.Phase).NotTo(Equal(PhaseRolloutFailed), "a superseded canary did not fail")
				g.Expect(d.Status.WaitingSince.IsZero()).To(BeTrue())
				next := Decide(Spec{Image: "v3", Canary: true, Steps: canarySpec("").Steps}, d.Status,
					Observation{Now: t0.Add(2 * time.Second), StableReplicas: 4})
				g.Expect(next.Actions).To(HaveExactElements(Action{Kind: ActionEnsureCanary, Image: "v3", Replicas: 1}))
				g.Expect(next.Status.CanaryStepIndex).To(BeZero())
				g.Expect(next.Status.CanaryVersion).To(Equal("v3"))
			}},
		{name: "rolled-back image is not retried while spec.image still names it", image: "v2",
			st:  Status{Phase: PhaseRolloutFailed, StableVersion: "v1", AbortedVersion: "v2"},
			obs: Observation{Now: t0, StableReplicas: 4},
			want: func(g Gomega, d Decision) {
				g.Expect(d.Actions).To(BeEmpty())
				g.Expect(d.Status.AbortedVersion).To(Equal("v2"))
			}},
		{name: "spec.image back to stable forgets the rolled-back image", image: "v1",
			st:  Status{Phase: PhaseRolloutFailed, StableVersion: "v1", AbortedVersion: "v2"},
			obs: Observation{Now: t0, StableReplicas: 4},
			want: func(g Gomega, d Decision) {
				g.Expect(d.Status.Phase).To(Equal(PhaseRunning))
				g.Expect(d.Status.AbortedVersion).To(BeEmpty())
				retry := Decide(canarySpec("v2"), d.Status, Observation{Now: t0.Add(time.Second), StableReplicas: 4})
				g.Expect(retry.Actions).To(HaveExactElements(Action{Kind: ActionEnsureCanary, Image: "v2", Replicas: 1}),
					"setting the image again retries it")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(canarySpec(tc.image), tc.st, tc.obs)
			tc.want(NewWithT(t), d)
		})
	}
}

// Promoting and RollingBack end by the progress deadline in a named state, and abort and a new image are honoured
// in both: the route, the Deployments and the canary (with its quota charge) are left consistent.
func TestPromotionAndRollbackEnd(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const deadline = 5 * time.Minute
	promoting := func(waitingSince time.Time) Status {
		return Status{Phase: PhaseRolloutInProgress, Stage: StagePromoting, StableVersion: "v1", CanaryVersion: "v2",
			CanaryWeight: 100, CanaryStepIndex: 6, BaselineReplicas: 1, WaitingSince: waitingSince}
	}
	rollingBack := func(phase Phase, waitingSince time.Time) Status {
		return Status{Phase: phase, Stage: StageRollingBack, StableVersion: "v1", CanaryVersion: "v2",
			CanaryWeight: 25, BaselineReplicas: 1, AbortedVersion: "v2", WaitingSince: waitingSince}
	}
	canary := CanaryObservation{Present: true, Image: "v2", Replicas: 1, RolledOut: true}
	allCanary := RouteObservation{CanaryWeight: 100, Accepted: true}
	atStableUnaccepted := RouteObservation{StableWeight: 100}
	for _, tc := range []struct {
		name  string
		spec  func(*Spec)
		st    Status
		obs   Observation
		stage Stage
		phase Phase
		// reason is RolloutHealthy's reason afterwards; actions the decided actions.
		reason  string
		actions []Action
		events  []string
	}{
		{name: "promotion whose stable never rolls out: still waiting before the deadline", st: promoting(t0),
			obs:   Observation{Now: t0.Add(deadline - time.Second), StableImage: "v2", Canary: canary, Route: allCanary},
			stage: StagePromoting, phase: PhaseRolloutInProgress},
		{name: "promotion whose stable never rolls out: reverted at the deadline", st: promoting(t0),
			obs:   Observation{Now: t0.Add(deadline), StableImage: "v2", Canary: canary, Route: allCanary},
			stage: StageRollingBack, phase: PhaseRolloutFailed, reason: ReasonProgressDeadlineExceeded,
			actions: []Action{{Kind: ActionSetStableImage, Image: "v1"}, {Kind: ActionSetWeights, StableWeight: 100}},
			events:  []string{ReasonProgressDeadlineExceeded}},
		{name: "promotion: the timer starts on entry", st: promoting(time.Time{}),
			obs:   Observation{Now: t0, StableImage: "v1", Canary: canary, Route: allCanary},
			stage: StagePromoting, phase: PhaseRolloutInProgress,
			actions: []Action{{Kind: ActionSetStableImage, Image: "v2"}}},
		{name: "promotion aborted", spec: func(s *Spec) { s.Abort = true }, st: promoting(t0),
			obs:   Observation{Now: t0.Add(time.Second), StableImage: "v2", Canary: canary, Route: allCanary},
			stage: StageRollingBack, phase: PhaseRolloutFailed, reason: ReasonAborted,
			actions: []Action{{Kind: ActionSetStableImage, Image: "v1"}, {Kind: ActionSetWeights, StableWeight: 100}},
			events:  []string{ReasonAborted}},
		{name: "promotion superseded by a new image", spec: func(s *Spec) { s.Image = "v3" }, st: promoting(t0),
			obs:   Observation{Now: t0.Add(time.Second), StableImage: "v2", Canary: canary, Route: allCanary},
			stage: StageRollingBack, phase: PhaseRolloutInProgress, reason: ReasonSuperseded,
			actions: []Action{{Kind: ActionSetStableImage, Image: "v1"}, {Kind: ActionSetWeights, StableWeight: 100}},
			events:  []string{ReasonSuperseded}},
		{name: "promotion whose route is never accepted: promoted at the deadline", st: promoting(t0),
			obs: Observation{Now: t0.Add(deadline), StableImage: "v2", StableRolledOut: true, Canary: canary,
				Route: atStableUnaccepted},
			stage: StageIdle, phase: PhaseRunning, reason: ReasonPromoted,
			actions: []Action{{Kind: ActionDeleteCanary}, {Kind: ActionRestoreHPA}, {Kind: ActionRegister}},
			events:  []string{ReasonRouteNotAccepted, ReasonPromoted}},
		{name: "rollback whose route is never accepted: waits before the deadline",
			st:    rollingBack(PhaseRolloutFailed, t0),
			obs:   Observation{Now: t0.Add(deadline - time.Second), StableImage: "v1", Canary: canary, Route: atStableUnaccepted},
			stage: StageRollingBack, phase: PhaseRolloutFailed},
		{name: "rollback whose route is never accepted: canary removed at the deadline",
			st:    rollingBack(PhaseRolloutFailed, t0),
			obs:   Observation{Now: t0.Add(deadline), StableImage: "v1", Canary: canary, Route: atStableUnaccepted},
			stage: StageIdle, phase: PhaseRolloutFailed,
			actions: []Action{{Kind: ActionDeleteCanary}, {Kind: ActionRestoreHPA}},
			events:  []string{ReasonRouteNotAccepted, ReasonRolledBack}},
		{name: "rollback of a superseded canary whose route is never accepted ends Running",
			st:    rollingBack(PhaseRolloutInProgress, t0),
			obs:   Observation{Now: t0.Add(deadline), StableImage: "v1", Canary: canary, Route: atStableUnaccepted},
			stage: StageIdle, phase: PhaseRunning,
			actions: []Action{{Kind: ActionDeleteCanary}, {Kind: ActionRestoreHPA}},
			events:  []string{ReasonRouteNotAccepted, ReasonRolledBack}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			spec := canarySpec("v2")
			spec.ProgressDeadline = deadline
			if tc.spec != nil {
				tc.spec(&spec)
			}
			d := Decide(spec, tc.st, tc.obs)
			g.Expect(d.Status.Stage).To(Equal(tc.stage))
			g.Expect(d.Status.Phase).To(Equal(tc.phase))
			g.Expect(d.Actions).To(Equal(tc.actions))
			var reasons []string
			for _, e := range d.Events {
				reasons = append(reasons, e.Reason)
			}
			g.Expect(reasons).To(Equal(tc.events))
			if tc.reason != "" {
				g.Expect(cond(d.Status, ConditionRolloutHealthy).Reason).To(Equal(tc.reason))
			}
			if tc.stage != StageIdle {
				g.Expect(d.RequeueAfter).To(BeNumerically(">", 0), "a waiting stage asks to be woken")
				left := deadline - tc.obs.Now.Sub(d.Status.WaitingSince)
				g.Expect(d.RequeueAfter).To(BeNumerically("<=", max(left, time.Second)), "never sleeps past the deadline")
			}
		})
	}
}

// A canary that stops being available during a pause is rolled back at the next analysis, whatever its own
// metrics say (the Gateway's 503s for it are not in them).
func TestUnavailableCanaryRollsBackMidPause(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := Status{Phase: PhaseRolloutInProgress, Stage: StageProgressing, StableVersion: "v1", CanaryVersion: "v2",
		CanaryWeight: 25, CanaryStepIndex: 1, BaselineReplicas: 4, PauseStartedAt: t0}
	healthy := Analysis{Outcome: Measured, Window: 2 * time.Minute, Requests: 1000, ErrorRate: 0, P99: 0.05}
	obs := Observation{Now: t0.Add(2 * time.Minute), StableReplicas: 4, Analysis: healthy,
		Canary: CanaryObservation{Present: true, Image: "v2", Replicas: 1, RolledOut: true},
		Route:  RouteObservation{StableWeight: 75, CanaryWeight: 25, Accepted: true}}
	g.Expect(Decide(canarySpec("v2"), st, obs).Status.CanaryStepIndex).To(Equal(int32(2)),
		"an available canary with good metrics passes the pause")
	obs.Canary.Unavailable, obs.Canary.RolledOut = true, false
	d := Decide(canarySpec("v2"), st, obs)
	g.Expect(d.Status.Phase).To(Equal(PhaseRolloutFailed))
	g.Expect(d.Status.Stage).To(Equal(StageRollingBack))
	g.Expect(d.Status.AbortedVersion).To(Equal("v2"))
	c := cond(d.Status, ConditionRolloutHealthy)
	g.Expect(c.Reason).To(Equal(ReasonCanaryUnavailable))
	g.Expect(c.Message).To(ContainSubstring("0 of 1 replicas available"))
	g.Expect(d.Actions).To(Equal([]Action{{Kind: ActionSetWeights, StableWeight: 100}}))
	// Before the pause's first analysis too.
	obs.Now = t0.Add(time.Second)
	g.Expect(Decide(canarySpec("v2"), st, obs).Status.Stage).To(Equal(StageRollingBack))
}
