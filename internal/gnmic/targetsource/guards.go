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
	// Unnamed is how many invalid devices have no name (not an object, no name, name mapping failed): any
	// Target about to be deleted may be one of them.
	Unnamed int
}

// Guard reasons, equal to the condition reasons.
const (
	GuardTruncated   = "Truncated"
	GuardEmptySource = "EmptySource"
	GuardPruneGuard  = "PruneGuard"
	// GuardInvalidDevices holds deletions while an invalid device has no name (equal to ReasonInvalidDevices).
	GuardInvalidDevices = "InvalidDevices"
)

// PruneGuard returns the guard that holds the run's deletions, or "" when they may proceed. Guards apply only
// when the run would delete, and are checked in order: Truncated, InvalidDevices, EmptySource, PruneGuard (a strict inequality:
// deleting exactly maxDeleteRatio percent is allowed).
func PruneGuard(in GuardInput) string {
	if in.Deletions == 0 {
		return ""
	}
	switch {
	case in.Truncated:
		return GuardTruncated
	case in.Unnamed > 0:
		return GuardInvalidDevices
	case in.Discovered == 0 && !in.AllowEmptySource:
		return GuardEmptySource
	case in.MaxDeleteRatio < 100 && in.Managed > 0 && in.Deletions*100 > in.MaxDeleteRatio*in.Managed:
		return GuardPruneGuard
	}
	return ""
}

// KeptTargets returns the Target names of the invalid devices that have a name: the inventory still lists them,
// so their Targets are kept as they are (never deleted for a mapping error). Duplicates are left out: their name
// belongs to the device that won it.
func KeptTargets(source string, failures []Failure) map[string]bool {
	keep := map[string]bool{}
	for _, f := range failures {
		if f.Name != "" && f.Reason != ReasonDuplicateName {
			keep[TargetName(source, f.Name)] = true
		}
	}
	return keep
}

// Unnamed counts the invalid devices without a name.
func Unnamed(failures []Failure) int {
	n := 0
	for _, f := range failures {
		if f.Name == "" {
			n++
		}
	}
	return n
}
