package placement

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ns/router%04d", i)
	}
	return out
}

func TestPlace(t *testing.T) {
	for name, tc := range map[string]struct {
		in             Input
		wantCapacity   int
		wantUnassigned []string
		wantLoads      []int
		check          func(g Gomega, r Result)
	}{
		"no pods":    {in: Input{Targets: []string{"b", "a"}}, wantUnassigned: []string{"a", "b"}},
		"no targets": {in: Input{Pods: 3}, wantLoads: []int{0, 0, 0}},
		"even split": {in: Input{Targets: names(9), Pods: 3}, wantCapacity: 3, wantLoads: []int{3, 3, 3}},
		"ceil capacity": {in: Input{Targets: names(10), Pods: 3}, wantCapacity: 4,
			check: func(g Gomega, r Result) { g.Expect(r.Assignments).To(HaveLen(10)) }},
		"pod capacity exhausted": {in: Input{Targets: names(10), Pods: 2, PodCapacity: 4}, wantCapacity: 4,
			wantLoads: []int{4, 4},
			check:     func(g Gomega, r Result) { g.Expect(r.Unassigned).To(HaveLen(2)) }},
		"duplicates counted once": {in: Input{Targets: []string{"a", "a", "b"}, Pods: 1}, wantCapacity: 2, wantLoads: []int{2}},
		"sticky kept": {in: Input{Targets: []string{"a", "b", "c"}, Pods: 3, Previous: map[string]int{"a": 2, "b": 2}},
			wantCapacity: 1,
			check: func(g Gomega, r Result) {
				// Only one of a, b fits on pod 2: the higher-scoring stays, the other moves.
				stay := "a"
				if Score("b", 2) > Score("a", 2) {
					stay = "b"
				}
				g.Expect(r.Assignments[stay]).To(Equal(2))
			}},
		"previous pod gone": {in: Input{Targets: []string{"a"}, Pods: 2, Previous: map[string]int{"a": 5}}, wantCapacity: 1,
			check: func(g Gomega, r Result) { g.Expect(r.Assignments).To(HaveKey("a")) }},
		"highest score wins": {in: Input{Targets: []string{"x"}, Pods: 4}, wantCapacity: 1,
			check: func(g Gomega, r Result) {
				best := 0
				for p := 1; p < 4; p++ {
					if Score("x", p) > Score("x", best) {
						best = p
					}
				}
				g.Expect(r.Assignments["x"]).To(Equal(best))
			}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := Place(tc.in)
			g.Expect(r.Capacity).To(Equal(tc.wantCapacity))
			if tc.wantUnassigned != nil {
				g.Expect(r.Unassigned).To(Equal(tc.wantUnassigned))
			}
			if tc.wantLoads != nil {
				g.Expect(PodLoads(r.Assignments, tc.in.Pods)).To(Equal(tc.wantLoads))
			}
			for _, l := range PodLoads(r.Assignments, tc.in.Pods) {
				g.Expect(l).To(BeNumerically("<=", r.Capacity))
			}
			if tc.check != nil {
				tc.check(g, r)
			}
		})
	}
}

func TestScoreIsFNV64aOfTargetColonPod(t *testing.T) {
	// FNV-64a("a:0") computed by hand from the published offset basis and prime.
	h := uint64(14695981039346656037)
	for _, c := range []byte("a:0") {
		h ^= uint64(c)
		h *= 1099511628211
	}
	NewWithT(t).Expect(Score("a", 0)).To(Equal(h))
}

func TestPlaceIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	in := Input{Targets: names(200), Pods: 5}
	a := Place(in)
	rev := append([]string(nil), in.Targets...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	b := Place(Input{Targets: rev, Pods: 5})
	g.Expect(b).To(Equal(a))
}

// TestScaleOutMovesAboutOneOverNPlusOne is the property behind sticky placement: going from N to N+1 pods moves
// at most about 1/(N+1) of the targets (the share the new pod must take), and going back moves them again.
func TestScaleOutMovesAboutOneOverNPlusOne(t *testing.T) {
	for _, n := range []int{100, 1000} {
		for pods := 1; pods <= 6; pods++ {
			t.Run(fmt.Sprintf("%d targets %d→%d pods", n, pods, pods+1), func(t *testing.T) {
				g := NewWithT(t)
				targets := names(n)
				before := Place(Input{Targets: targets, Pods: pods})
				after := Place(Input{Targets: targets, Pods: pods + 1, Previous: before.Assignments})
				g.Expect(after.Unassigned).To(BeEmpty())
				moves := Moves(before.Assignments, after.Assignments)
				ideal := float64(n) / float64(pods+1)
				// Tolerance: rounding of ceil capacities, one target per pod.
				g.Expect(float64(moves)).To(BeNumerically("<=", ideal+float64(pods+1)),
					"moved %d of %d targets, ideal %.0f", moves, n, ideal)
				// Every move lands on the new pod.
				for tgt, p := range after.Assignments {
					if before.Assignments[tgt] != p {
						g.Expect(p).To(Equal(pods))
					}
				}
				// And re-placing with the new placement as previous is a no-op.
				again := Place(Input{Targets: targets, Pods: pods + 1, Previous: after.Assignments})
				g.Expect(Moves(after.Assignments, again.Assignments)).To(BeZero())
			})
		}
	}
}

// TestFreshPlacementIsRendezvous: without history, a scale-out still moves only a modest share, because scores
// do not depend on the pod count (bounded load adds some cascading).
func TestFreshPlacementIsRendezvous(t *testing.T) {
	g := NewWithT(t)
	targets := names(1000)
	for pods := 2; pods <= 5; pods++ {
		before := Place(Input{Targets: targets, Pods: pods})
		after := Place(Input{Targets: targets, Pods: pods + 1})
		moves := Moves(before.Assignments, after.Assignments)
		g.Expect(float64(moves)).To(BeNumerically("<=", 2.5*1000/float64(pods+1)), "pods %d moved %d", pods, moves)
	}
}

func TestAddingOneTargetMovesNothing(t *testing.T) {
	g := NewWithT(t)
	targets := names(99)
	before := Place(Input{Targets: targets, Pods: 3, PodCapacity: 50})
	after := Place(Input{Targets: append(targets, "ns/new"), Pods: 3, PodCapacity: 50, Previous: before.Assignments})
	g.Expect(Moves(before.Assignments, after.Assignments)).To(BeZero())
	g.Expect(after.Assignments).To(HaveKey("ns/new"))
}

// FuzzPlace: any input gives a placement within capacity that places every target or counts it unassigned.
func FuzzPlace(f *testing.F) {
	f.Add(uint16(10), uint8(3), uint8(0), uint8(1))
	f.Add(uint16(100), uint8(1), uint8(7), uint8(5))
	f.Add(uint16(0), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, n uint16, pods, capacity, prevPod uint8) {
		targets := names(int(n % 500))
		prev := map[string]int{}
		for i, tg := range targets {
			if i%3 == 0 {
				prev[tg] = int(prevPod)
			}
		}
		r := Place(Input{Targets: targets, Pods: int(pods % 16), PodCapacity: int(capacity), Previous: prev})
		if len(r.Assignments)+len(r.Unassigned) != len(targets) {
			t.Fatalf("placed %d + unassigned %d != %d", len(r.Assignments), len(r.Unassigned), len(targets))
		}
		for _, l := range PodLoads(r.Assignments, int(pods%16)) {
			if l > r.Capacity {
				t.Fatalf("load %d over capacity %d", l, r.Capacity)
			}
		}
	})
}
