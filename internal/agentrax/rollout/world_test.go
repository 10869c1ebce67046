package rollout

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// world plays the cluster for scenario tests: it applies the actions Decide returns, and on each tick the
// "kube-controller-manager" rolls Deployments out and the "Gateway controller" accepts the route — one tick late,
// so every wait in the state machine is exercised. Only Status survives a simulated manager restart.
type world struct {
	t   *testing.T
	now time.Time
	// decidedAt is the clock of the last reconcile.
	decidedAt time.Time
	st        Status

	stableImage     string
	stableRolledOut bool
	stableReplicas  int32
	canary          CanaryObservation
	route           RouteObservation
	// gatewayDown keeps the route un-accepted.
	gatewayDown bool

	// analysis answers the canary queries for a window; nil means healthy traffic.
	analysis func(window time.Duration) Analysis
	// log records actions and events in order, e.g. "SetWeights 100/0", "event Promoted".
	log []string
	// weights records every canary weight the route accepted.
	weights []int32
}

func newWorld(t *testing.T) *world {
	const stable = "v1"
	return &world{t: t, now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC),
		st:          Status{Phase: PhaseRunning, StableVersion: stable},
		stableImage: stable, stableRolledOut: true, stableReplicas: 4,
		route: RouteObservation{StableWeight: 100, Accepted: true}}
}

func healthy(rps float64) func(time.Duration) Analysis {
	return func(w time.Duration) Analysis {
		return Analysis{Outcome: Measured, Window: w, Requests: rps * w.Seconds(), ErrorRate: 0.001, P99: 0.08}
	}
}

func (w *world) observe() Observation {
	return Observation{Now: w.now, StableImage: w.stableImage, StableRolledOut: w.stableRolledOut,
		StableReplicas: w.stableReplicas, Canary: w.canary, Route: w.route}
}

func (w *world) apply(a Action) {
	switch a.Kind {
	case ActionEnsureCanary:
		w.canary = CanaryObservation{Present: true, Image: a.Image, Replicas: a.Replicas}
		w.log = append(w.log, fmt.Sprintf("%s %s x%d", a.Kind, a.Image, a.Replicas))
		return
	case ActionScaleCanary:
		w.canary.Replicas, w.canary.RolledOut = a.Replicas, false
		w.log = append(w.log, fmt.Sprintf("%s x%d", a.Kind, a.Replicas))
		return
	case ActionSetWeights:
		w.route = RouteObservation{StableWeight: a.StableWeight, CanaryWeight: a.CanaryWeight}
		w.log = append(w.log, fmt.Sprintf("%s %d/%d", a.Kind, a.StableWeight, a.CanaryWeight))
		return
	case ActionSetStableImage:
		w.stableImage, w.stableRolledOut = a.Image, false
	case ActionDeleteCanary:
		if w.route.CanaryWeight != 0 || !w.route.Accepted {
			w.t.Fatalf("canary deleted while the route sends it %d%% (accepted=%v)", w.route.CanaryWeight,
				w.route.Accepted)
		}
		w.canary = CanaryObservation{}
	}
	w.log = append(w.log, string(a.Kind))
}

// step runs one reconcile: analysis (when a pause is running), Decide, actions, persisted status.
func (w *world) step(spec Spec) Decision {
	w.decidedAt = w.now
	obs := w.observe()
	if win, ok := AnalysisWindow(spec, w.st, w.now); ok {
		an := healthy(50)
		if w.analysis != nil {
			an = w.analysis
		}
		obs.Analysis = an(win)
	}
	d := Decide(spec, w.st, obs)
	for _, a := range d.Actions {
		w.apply(a)
	}
	for _, e := range d.Events {
		w.log = append(w.log, "event "+e.Reason)
	}
	w.st = d.Status
	return d
}

// tick lets the cluster catch up and moves the clock to the next reconcile.
func (w *world) tick(d Decision) {
	w.canary.RolledOut = w.canary.Present
	w.stableRolledOut = true
	if !w.route.Accepted && !w.gatewayDown {
		w.route.Accepted = true
		w.weights = append(w.weights, w.route.CanaryWeight)
	}
	if !d.Continue {
		w.now = w.now.Add(max(d.RequeueAfter, time.Second))
	}
}

// runUntil reconciles until done reports true, failing after max reconciles.
func (w *world) runUntil(spec Spec, maxSteps int, done func() bool) {
	w.t.Helper()
	for range maxSteps {
		if done() {
			return
		}
		w.tick(w.step(spec))
	}
	w.t.Fatalf("not done after %d reconciles at %s: status %+v\nlog %v", maxSteps, w.now, w.st, w.log)
}

func (w *world) idle() bool { return w.st.Stage == StageIdle }

func (w *world) index(entry string) int {
	for i, l := range w.log {
		if l == entry {
			return i
		}
	}
	return -1
}

var nan = math.NaN()
