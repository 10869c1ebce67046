package promreal

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
)

// manager drives rollout.Decide on the real clock against a real Prometheus, playing the controller (analysis,
// actions, persisted status) and the cluster (Deployments roll out and the route is accepted one reconcile
// later). Traffic follows the weight the route accepted.
type manager struct {
	t       *testing.T
	spec    rollout.Spec
	prom    *rollout.Prometheus
	stable  *app
	canary  *app
	traffic *traffic
	// persisted is the status as the API server stores it (JSON, metav1.Time at second precision).
	persisted []byte

	stableImage string
	canaryObs   rollout.CanaryObservation
	route       rollout.RouteObservation
	// accepted lists every canary weight the route accepted.
	accepted []int32
}

// persistedStatus mirrors what the CRD stores.
type persistedStatus struct {
	Phase                rollout.Phase      `json:"phase,omitempty"`
	Stage                rollout.Stage      `json:"stage,omitempty"`
	StableVersion        string             `json:"stableVersion,omitempty"`
	CanaryVersion        string             `json:"canaryVersion,omitempty"`
	CanaryWeight         int32              `json:"canaryWeight,omitempty"`
	CanaryStepIndex      int32              `json:"canaryStepIndex,omitempty"`
	PauseStartedAt       *metav1.Time       `json:"pauseStartedAt,omitempty"`
	PromUnreachableSince *metav1.Time       `json:"promUnreachableSince,omitempty"`
	BaselineReplicas     int32              `json:"baselineReplicas,omitempty"`
	AbortedVersion       string             `json:"abortedVersion,omitempty"`
	AbortLatched         bool               `json:"abortLatched,omitempty"`
	Conditions           []metav1.Condition `json:"conditions,omitempty"`
}

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}

func (m *manager) save(st rollout.Status) {
	b, err := json.Marshal(persistedStatus{Phase: st.Phase, Stage: st.Stage, StableVersion: st.StableVersion,
		CanaryVersion: st.CanaryVersion, CanaryWeight: st.CanaryWeight, CanaryStepIndex: st.CanaryStepIndex,
		PauseStartedAt: timePtr(st.PauseStartedAt), PromUnreachableSince: timePtr(st.PromUnreachableSince),
		BaselineReplicas: st.BaselineReplicas, AbortedVersion: st.AbortedVersion, AbortLatched: st.AbortLatched,
		Conditions: st.Conditions})
	NewWithT(m.t).Expect(err).NotTo(HaveOccurred())
	m.persisted = b
}

func (m *manager) status() rollout.Status {
	var p persistedStatus
	NewWithT(m.t).Expect(json.Unmarshal(m.persisted, &p)).To(Succeed())
	st := rollout.Status{Phase: p.Phase, Stage: p.Stage, StableVersion: p.StableVersion,
		CanaryVersion: p.CanaryVersion, CanaryWeight: p.CanaryWeight, CanaryStepIndex: p.CanaryStepIndex,
		BaselineReplicas: p.BaselineReplicas, AbortedVersion: p.AbortedVersion, AbortLatched: p.AbortLatched,
		Conditions: p.Conditions}
	if p.PauseStartedAt != nil {
		st.PauseStartedAt = p.PauseStartedAt.Time
	}
	if p.PromUnreachableSince != nil {
		st.PromUnreachableSince = p.PromUnreachableSince.Time
	}
	return st
}

func newManager(t *testing.T, name string, rps float64) (*manager, *promServer) {
	m := &manager{t: t, stable: newApp(t, name, "stable"), canary: newApp(t, name, "canary"), stableImage: "v1",
		route: rollout.RouteObservation{StableWeight: 100, Accepted: true},
		spec: rollout.Spec{Image: "v2", Canary: true, Steps: []rollout.Step{
			{SetWeight: ptr(25)}, {Pause: 4 * time.Second}, {SetWeight: ptr(50)}, {Pause: 4 * time.Second},
			{SetWeight: ptr(100)}, {Pause: 3 * time.Second}},
			Thresholds:      rollout.Thresholds{MaxErrorRate: 0.1, MaxP99: 500 * time.Millisecond, MinRequestSample: 20},
			FailsafeTimeout: 3 * time.Second, AnalysisInterval: time.Second}}
	m.stable.set(0.01, 0.08)
	m.canary.set(0.01, 0.08)
	m.traffic = startTraffic(t, rps, m.stable, m.canary)
	prom := startPrometheus(t, m.stable, m.canary)
	m.prom = prom.client()
	m.save(rollout.Status{Phase: rollout.PhaseRunning, StableVersion: "v1"})
	return m, prom
}

func ptr(v int32) *int32 { return &v }

// reconcile is one pass of the controller: analyze if a pause runs, decide, act, persist.
func (m *manager) reconcile() rollout.Decision {
	now := time.Now()
	st := m.status()
	obs := rollout.Observation{Now: now, StableImage: m.stableImage, StableRolledOut: true, StableReplicas: 4,
		Canary: m.canaryObs, Route: m.route}
	if w, ok := rollout.AnalysisWindow(m.spec, st, now); ok {
		obs.Analysis = m.prom.Analyze(context.Background(), rollout.Metrics{}, m.canary.target(), w, now)
	}
	d := rollout.Decide(m.spec, st, obs)
	for _, a := range d.Actions {
		switch a.Kind {
		case rollout.ActionEnsureCanary:
			m.canaryObs = rollout.CanaryObservation{Present: true, Image: a.Image, Replicas: a.Replicas}
		case rollout.ActionScaleCanary:
			m.canaryObs.Replicas, m.canaryObs.RolledOut = a.Replicas, false
		case rollout.ActionSetWeights:
			m.route = rollout.RouteObservation{StableWeight: a.StableWeight, CanaryWeight: a.CanaryWeight}
		case rollout.ActionSetStableImage:
			m.stableImage = a.Image
		case rollout.ActionDeleteCanary:
			NewWithT(m.t).Expect(m.route).To(Equal(rollout.RouteObservation{StableWeight: 100, Accepted: true}),
				"the canary is deleted only after the route sends it nothing")
			m.canaryObs = rollout.CanaryObservation{}
		}
	}
	m.save(d.Status)
	// The cluster catches up after this reconcile: pods become ready, the Gateway accepts the route.
	m.canaryObs.RolledOut = m.canaryObs.Present
	if !m.route.Accepted {
		m.route.Accepted = true
		m.accepted = append(m.accepted, m.route.CanaryWeight)
		m.traffic.set(-1, m.route.CanaryWeight)
	}
	return d
}

// until reconciles on the real clock until check passes.
func (m *manager) until(timeout time.Duration, check func(g Gomega, st rollout.Status)) {
	m.t.Helper()
	NewWithT(m.t).Eventually(func(g Gomega) {
		m.reconcile()
		check(g, m.status())
	}).WithTimeout(timeout).WithPolling(250*time.Millisecond).Should(Succeed(),
		func() string { return fmt.Sprintf("status %s, accepted weights %v", m.persisted, m.accepted) })
}

func condition(st rollout.Status, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestCanaryHealthyPromotes(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, "healthy-bot", 40)
	m.until(60*time.Second, func(g Gomega, st rollout.Status) { g.Expect(st.StableVersion).To(Equal("v2")) })
	g := NewWithT(t)
	st := m.status()
	g.Expect(st.Phase).To(Equal(rollout.PhaseRunning))
	g.Expect(st.Stage).To(Equal(rollout.StageIdle))
	g.Expect(m.accepted).To(Equal([]int32{25, 50, 100, 0}))
	g.Expect(m.stableImage).To(Equal("v2"))
	g.Expect(m.canaryObs.Present).To(BeFalse())
	g.Expect(condition(st, rollout.ConditionRolloutHealthy).Reason).To(Equal(rollout.ReasonPromoted))
}

func TestCanaryLatencySpikeRollsBack(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, "slow-bot", 40)
	m.until(60*time.Second, func(g Gomega, st rollout.Status) { g.Expect(st.CanaryWeight).To(Equal(int32(50))) })
	// A 500 ms latency spike mid-rollout.
	m.canary.set(0.05, 0.6)
	m.until(60*time.Second, func(g Gomega, st rollout.Status) {
		g.Expect(st.Stage).To(Equal(rollout.StageIdle))
		g.Expect(st.Phase).To(Equal(rollout.PhaseRolloutFailed))
	})
	g := NewWithT(t)
	st := m.status()
	g.Expect(m.accepted).To(Equal([]int32{25, 50, 0}), "rolled back before weight 100, stable back at 100")
	g.Expect(m.route).To(Equal(rollout.RouteObservation{StableWeight: 100, Accepted: true}))
	g.Expect(st.AbortedVersion).To(Equal("v2"))
	c := condition(st, rollout.ConditionRolloutHealthy)
	g.Expect(c.Reason).To(Equal(rollout.ReasonP99LatencyExceeded))
	g.Expect(c.Message).To(MatchRegexp(`^p99 latency \d+ms over \d+s \(\d+ requests\) exceeds maxP99LatencyMs 500ms$`))
}

func TestCanaryErrorSpikeRollsBack(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, "flaky-bot", 40)
	m.canary.set(0.4, 0.08)
	m.until(60*time.Second, func(g Gomega, st rollout.Status) {
		g.Expect(st.Stage).To(Equal(rollout.StageIdle))
		g.Expect(st.Phase).To(Equal(rollout.PhaseRolloutFailed))
	})
	g := NewWithT(t)
	g.Expect(m.accepted).To(Equal([]int32{25, 0}))
	g.Expect(condition(m.status(), rollout.ConditionRolloutHealthy).Reason).To(Equal(rollout.ReasonErrorRateExceeded))
}

func TestCanaryPrometheusDownFailsSafe(t *testing.T) {
	t.Parallel()
	m, prom := newManager(t, "lonely-bot", 40)
	m.until(60*time.Second, func(g Gomega, st rollout.Status) {
		g.Expect(st.CanaryStepIndex).To(Equal(int32(1)))
		g.Expect(st.PauseStartedAt.IsZero()).To(BeFalse())
	})
	prom.stop()
	stopped := time.Now()
	m.until(30*time.Second, func(g Gomega, st rollout.Status) { g.Expect(st.Stage).NotTo(Equal(rollout.StageProgressing)) })
	g := NewWithT(t)
	g.Expect(time.Since(stopped)).To(BeNumerically(">=", m.spec.FailsafeTimeout), "not before the fail-safe timeout")
	c := condition(m.status(), rollout.ConditionRolloutHealthy)
	g.Expect(c.Reason).To(Equal(rollout.ReasonPrometheusDown))
	g.Expect(c.Message).To(ContainSubstring("connection refused"))
	m.until(10*time.Second, func(g Gomega, st rollout.Status) { g.Expect(st.Stage).To(Equal(rollout.StageIdle)) })
	g.Expect(m.accepted).To(Equal([]int32{25, 0}))
}

func TestCanaryLowTrafficHolds(t *testing.T) {
	t.Parallel()
	// 2 requests/s in total: the canary's 25% never reaches 20 requests within the 12 s extension cap.
	m, _ := newManager(t, "quiet-bot", 2)
	m.until(60*time.Second, func(g Gomega, st rollout.Status) {
		g.Expect(condition(st, rollout.ConditionSampleInsufficient).Reason).To(Equal(rollout.ReasonHeldInconclusive))
	})
	NewWithT(t).Consistently(func(g Gomega) {
		m.reconcile()
		st := m.status()
		g.Expect(st.Stage).To(Equal(rollout.StageProgressing), "neither rolled back nor promoted")
		g.Expect(st.CanaryStepIndex).To(Equal(int32(1)))
		g.Expect(condition(st, rollout.ConditionSampleInsufficient).Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(4 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())
	NewWithT(t).Expect(m.accepted).To(Equal([]int32{25}))
}

func TestCanaryRestartResumesMidPause(t *testing.T) {
	t.Parallel()
	m, _ := newManager(t, "restart-bot", 40)
	m.until(60*time.Second, func(g Gomega, st rollout.Status) {
		g.Expect(st.CanaryStepIndex).To(Equal(int32(3)))
		g.Expect(st.PauseStartedAt.IsZero()).To(BeFalse())
	})
	// The manager is killed: only the persisted status and the cluster survive. A new one resumes.
	before := m.status()
	restarted := &manager{t: t, spec: m.spec, prom: m.prom, stable: m.stable, canary: m.canary, traffic: m.traffic,
		persisted: m.persisted, stableImage: m.stableImage, canaryObs: m.canaryObs, route: m.route,
		accepted: m.accepted}
	d := restarted.reconcile()
	g := NewWithT(t)
	g.Expect(d.Status.CanaryStepIndex).To(Equal(int32(3)), "same step")
	g.Expect(d.Status.PauseStartedAt).To(Equal(before.PauseStartedAt), "same pause start")
	g.Expect(d.Actions).NotTo(ContainElement(HaveField("Kind", rollout.ActionSetWeights)), "no step re-applied")
	restarted.until(60*time.Second, func(g Gomega, st rollout.Status) { g.Expect(st.StableVersion).To(Equal("v2")) })
	g.Expect(restarted.accepted).To(Equal([]int32{25, 50, 100, 0}))
}
