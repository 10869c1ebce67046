package pipelines

import "time"

// BackoffSince is when to look again at something that has been failing for waited: first at first, then as long
// again as it has waited (so successive waits double), at most limit. waited comes from a condition's transition
// time written by the same process's clock.
func BackoffSince(waited, first, limit time.Duration) time.Duration {
	return min(max(waited, first), limit)
}
