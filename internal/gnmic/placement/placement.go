// Package placement spreads targets over the pods of a gNMIc collector cluster with bounded-load rendezvous
// hashing: every (target, pod) pair gets a score, FNV-64a of "target:podIndex", and a target goes to the
// highest-scoring pod that still has room. A pod holds at most the capacity (podCapacity, or ceil(targets/pods)
// when unset). Targets keep the pod they are on (read back from Target status) while it exists and has room, so a
// change in pods moves only the targets that must move.
package placement

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// Input is what a placement is computed from.
type Input struct {
	// Targets are the target names to place; order does not matter.
	Targets []string
	// Pods is the number of collector pods (indexes 0..Pods-1).
	Pods int
	// PodCapacity is the most targets one pod may hold; 0 means ceil(len(Targets)/Pods).
	PodCapacity int
	// Previous maps a target to the pod index it is on now; entries for other targets or pods are ignored.
	Previous map[string]int
	// Unavailable lists pod indexes that get no target (a pod unready past the Cluster's grace period): their
	// targets go where the same rule ranks next, and the default capacity spreads over the other pods only.
	Unavailable []int
}

// Result is a placement.
type Result struct {
	// Assignments maps each placed target to its pod index.
	Assignments map[string]int
	// Unassigned lists, sorted, the targets that fit on no pod.
	Unassigned []string
	// Capacity is the per-pod limit that was applied.
	Capacity int
}

// Score is the rendezvous weight of a target on a pod.
func Score(target string, pod int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(target + ":" + strconv.Itoa(pod)))
	return h.Sum64()
}

// Place computes a deterministic placement: the same input always gives the same result.
func Place(in Input) Result {
	targets := slices.Clone(in.Targets)
	slices.Sort(targets)
	targets = slices.Compact(targets)
	res := Result{Assignments: make(map[string]int, len(targets))}
	if in.Pods <= 0 {
		res.Unassigned = targets
		return res
	}
	available := in.Pods
	down := make([]bool, in.Pods)
	for _, p := range in.Unavailable {
		if p >= 0 && p < in.Pods && !down[p] {
			down[p] = true
			available--
		}
	}
	if available == 0 {
		res.Unassigned = targets
		return res
	}
	capacity := in.PodCapacity
	if capacity <= 0 {
		capacity = (len(targets) + available - 1) / available
	}
	res.Capacity = capacity
	load := make([]int, in.Pods)
	for p := range down {
		if down[p] {
			load[p] = capacity // full: nothing is placed there
		}
	}

	// Sticky targets first. When a pod has more sticky targets than room, it keeps those that score highest on
	// it: the ones plain rendezvous hashing would also put there.
	sticky := make([][]string, in.Pods)
	var fresh []string
	for _, t := range targets {
		if p, ok := in.Previous[t]; ok && p >= 0 && p < in.Pods && !down[p] {
			sticky[p] = append(sticky[p], t)
		} else {
			fresh = append(fresh, t)
		}
	}
	for p, ts := range sticky {
		slices.SortFunc(ts, func(a, b string) int { return cmpScore(Score(b, p), Score(a, p), a, b) })
		for _, t := range ts {
			if load[p] < capacity {
				res.Assignments[t] = p
				load[p]++
			} else {
				fresh = append(fresh, t)
			}
		}
	}
	slices.Sort(fresh)
	for _, t := range fresh {
		best, bestScore := -1, uint64(0)
		for p := range in.Pods {
			if load[p] >= capacity {
				continue
			}
			if s := Score(t, p); best < 0 || s > bestScore {
				best, bestScore = p, s
			}
		}
		if best < 0 {
			res.Unassigned = append(res.Unassigned, t)
			continue
		}
		res.Assignments[t] = best
		load[best]++
	}
	return res
}

// cmpScore orders by score, then by name for equal scores.
func cmpScore(a, b uint64, an, bn string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	if an < bn {
		return -1
	}
	if an > bn {
		return 1
	}
	return 0
}

// Moves counts the targets whose pod differs between two placements (targets in only one are not counted).
func Moves(before, after map[string]int) int {
	n := 0
	for t, p := range after {
		if q, ok := before[t]; ok && q != p {
			n++
		}
	}
	return n
}

// PodLoads returns how many targets each pod holds.
func PodLoads(assignments map[string]int, pods int) []int {
	loads := make([]int, pods)
	for _, p := range assignments {
		if p >= 0 && p < pods {
			loads[p]++
		}
	}
	return loads
}
