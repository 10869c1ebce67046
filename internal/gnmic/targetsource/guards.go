package targetsource

// GuardInput is what the prune guards look at.
type GuardInput struct {
	// Truncated is true when the source's answer was incomplete (pagination loop or maxPages reached).
	Truncated bool
	// Discovered is how many devices the source returned.
	Discovered int
	// AllowEmptySource lets an empty answer prune.
	AllowEmptySource bool
	// MaxDeleteRatio is the largest share of managed Targets, in percent, a run may delete.
	MaxDeleteRatio int
	// Managed is how many Targets the TargetSource managed before the run.
	Managed int
	// Deletions is how many of them the run would delete.
	Deletions int
}

// Guard reasons, equal to the condition reasons.
const (
	GuardTruncated   = "Truncated"
	GuardEmptySource = "EmptySource"
	GuardPruneGuard  = "PruneGuard"
)

// PruneGuard returns the guard that holds the run's deletions, or "" when they may proceed. Guards apply only
// when the run would delete, and are checked in order: Truncated, EmptySource, PruneGuard (a strict inequality:
// deleting exactly maxDeleteRatio percent is allowed).
func PruneGuard(in GuardInput) string {
	if in.Deletions == 0 {
		return ""
	}
	switch {
	case in.Truncated:
		return GuardTruncated
	case in.Discovered == 0 && !in.AllowEmptySource:
		return GuardEmptySource
	case in.MaxDeleteRatio < 100 && in.Managed > 0 && in.Deletions*100 > in.MaxDeleteRatio*in.Managed:
		return GuardPruneGuard
	}
	return ""
}
