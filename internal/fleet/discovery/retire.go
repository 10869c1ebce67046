package discovery

// Retirement is what happens to the CRs of a discovery whose object left its result.
type Retirement struct {
	// Delete are the CRs whose object is gone from Fleet altogether (only under a Delete removal policy).
	Delete []Existing
	// Stale are the CRs to mark stale: their object is only no longer selected, or the policy keeps them.
	Stale []Existing
	// EmptyResult is set when Fleet listed nothing at all while the discovery manages CRs. That is more often
	// an outage or a wrong stack than an intent, so nothing is deleted or marked and the discovery stalls.
	EmptyResult bool
}

// Retire decides the fate of the gone CRs of a plan. total is how many objects the unfiltered Fleet list held
// (inactive collectors included); present says whether an ID is in that list; managed is how many CRs the
// discovery has. Only an object missing from the unfiltered list may delete its CR: one that merely left the
// selection (a selector edit, an inactive collector, an attribute change) still exists in Fleet, and deleting
// its CR would undo what the CR writes there.
func Retire(gone []Existing, total, managed int, present func(id string) bool, deleteGone bool) Retirement {
	if total == 0 && managed > 0 {
		return Retirement{EmptyResult: true}
	}
	var r Retirement
	for _, e := range gone {
		if deleteGone && !present(e.ID) {
			r.Delete = append(r.Delete, e)
		} else {
			r.Stale = append(r.Stale, e)
		}
	}
	return r
}
