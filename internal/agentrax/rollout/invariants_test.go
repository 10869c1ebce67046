package rollout

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
)

// FuzzDecideInvariants drives the state machine through arbitrary sequences of analysis results, Gateway
// outages, aborts, image changes, out-of-band deletions, HPA moves and clock jumps, and checks the safety rules
// after every reconcile:
//   - the canary is deleted only once the route sends it nothing (world.apply fails the test otherwise);
//   - a canary is promoted only after every pause step passed its analysis;
//   - the stable image changes only during promotion;
//   - a pause start never moves while its step runs;
//   - the Prometheus fail-safe never fires before the timeout of continuous unreachability.
func FuzzDecideInvariants(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3})
	f.Add([]byte{0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 4, 4, 4, 4, 4, 4, 4})
	f.Add([]byte{0, 0, 8, 0, 9, 0, 0, 10, 0, 11, 0, 12, 0, 13, 0, 0, 14, 0, 15, 0})
	f.Add([]byte{0, 1, 0, 2, 0, 5, 0, 6, 0, 7, 0, 16, 17, 18, 19, 20, 21, 0, 0, 0})
	// Found by fuzzing: an answer the machine did not judge (canary under repair) must still reset the timer.
	f.Add([]byte("0000\x04\x04\x04\x04\x0400000\x04     ,"))
	// The Gateway stops accepting routes for longer than the progress deadline.
	f.Add(append([]byte{0, 0, 0, 0, 8}, bytes.Repeat([]byte{55}, 16)...))
	f.Fuzz(func(t *testing.T, script []byte) {
		w := newWorld(t)
		spec := canarySpec("v2")
		var unreachableSince time.Time
		passed := 0
		for _, b := range script {
			outcome := b % 8
			w.analysis = func(win time.Duration) Analysis {
				a := healthy(50)(win)
				switch outcome {
				case 1:
					a.P99 = 0.9
				case 2:
					a.ErrorRate = 0.5
				case 3:
					a.Requests = 5
				case 4:
					a = Analysis{Outcome: Unreachable, Window: win, Err: "refused"}
				case 5:
					a = Analysis{Outcome: QueryFailed, Window: win, Err: "bad_data"}
				case 6:
					a.P99 = nan
				}
				if a.Outcome == Unreachable {
					if unreachableSince.IsZero() {
						unreachableSince = w.now
					}
				} else {
					unreachableSince = time.Time{}
				}
				return a
			}
			switch b / 8 % 16 {
			case 1:
				w.gatewayDown = !w.gatewayDown
			case 2:
				spec.Abort = !spec.Abort
			case 3:
				spec.Image = []string{"v1", "v2", "v3", "v4"}[b%4]
			case 4:
				w.canary = CanaryObservation{}
			case 5:
				w.stableReplicas = int32(b%13) + 1
			case 6:
				w.now = w.now.Add(time.Duration(b) * time.Second)
			}

			before := w.st
			stableBefore := w.stableImage
			n := len(w.log)
			d := w.step(spec)
			for _, l := range w.log[n:] {
				switch l {
				case "event " + ReasonCanaryStarted:
					passed = 0
				case "event " + ReasonAnalysisPassed:
					passed++
				}
			}
			if before.Stage == StageProgressing && w.st.Stage == StagePromoting && passed != 3 {
				t.Fatalf("promoting %s after %d of 3 pauses passed; log %v", before.CanaryVersion, passed, w.log)
			}
			if w.stableImage != stableBefore && before.Stage != StagePromoting {
				t.Fatalf("stable image changed to %s in stage %q", w.stableImage, before.Stage)
			}
			if before.Stage == StageProgressing && w.st.Stage == StageProgressing &&
				before.CanaryStepIndex == w.st.CanaryStepIndex && !before.PauseStartedAt.IsZero() &&
				!w.st.PauseStartedAt.Equal(before.PauseStartedAt) {
				t.Fatalf("pause start moved from %s to %s", before.PauseStartedAt, w.st.PauseStartedAt)
			}
			if c := meta.FindStatusCondition(w.st.Conditions, ConditionRolloutHealthy); c != nil &&
				c.Reason == ReasonPrometheusDown && before.Stage == StageProgressing &&
				w.st.Stage != StageProgressing {
				if down := w.now.Sub(unreachableSince); down < DefaultFailsafeTimeout {
					t.Fatalf("fail-safe after %s of unreachability", down)
				}
			}
			if w.st.Stage == StageProgressing && !w.st.WaitingSince.IsZero() &&
				w.now.Sub(w.st.WaitingSince) >= DefaultProgressDeadline {
				t.Fatalf("still waiting %s after the progress deadline", w.now.Sub(w.st.WaitingSince))
			}
			if strings.HasPrefix(string(w.st.Stage), "?") {
				t.Fatalf("bad stage %q", w.st.Stage)
			}
			w.tick(d)
		}
	})
}
