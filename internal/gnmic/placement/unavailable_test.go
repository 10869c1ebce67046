package placement

import (
	"testing"

	. "github.com/onsi/gomega"
)

// A pod unready past the grace period is left out: its targets go to the pods rendezvous hashing ranks next for
// them, the other pods' targets stay where they are, and when the pod is back the same rule brings targets to it
// (only onto it, about a third of them).
func TestPlaceAroundAnUnavailablePod(t *testing.T) {
	g := NewWithT(t)
	targets := names(90)
	before := Place(Input{Targets: targets, Pods: 3})
	g.Expect(PodLoads(before.Assignments, 3)).To(Equal([]int{30, 30, 30}))

	evacuated := Place(Input{Targets: targets, Pods: 3, Previous: before.Assignments, Unavailable: []int{1}})
	g.Expect(evacuated.Unassigned).To(BeEmpty())
	g.Expect(PodLoads(evacuated.Assignments, 3)[1]).To(BeZero(), "nothing stays on the unavailable pod")
	for tg, pod := range before.Assignments {
		if pod != 1 {
			g.Expect(evacuated.Assignments[tg]).To(Equal(pod), "%s stays on its ready pod", tg)
		}
	}
	g.Expect(Moves(before.Assignments, evacuated.Assignments)).To(Equal(30))

	back := Place(Input{Targets: targets, Pods: 3, Previous: evacuated.Assignments})
	for tg, pod := range back.Assignments {
		if pod != evacuated.Assignments[tg] {
			g.Expect(pod).To(Equal(1), "targets only move onto the returning pod")
		}
	}
	g.Expect(PodLoads(back.Assignments, 3)).To(Equal([]int{30, 30, 30}))

	none := Place(Input{Targets: targets, Pods: 2, Unavailable: []int{0, 1}})
	g.Expect(none.Unassigned).To(HaveLen(90), "no pod available: nothing is placed")
}
