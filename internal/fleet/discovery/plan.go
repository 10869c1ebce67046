package discovery

import (
	"fmt"
	"sort"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// Remote is one Fleet object the discovery found.
type Remote struct {
	// ID is the Fleet ID.
	ID string
	// CRName is the derived CR name.
	CRName string
	// Invalid, when set, says why no CR can represent the object (NameSanitizationFailed).
	Invalid string
}

// Existing is a CR in the target namespace.
type Existing struct {
	// Name is the CR name.
	Name string
	// DiscoveredBy is the discovery (ns/name) recorded on the CR, "" when none created it.
	DiscoveredBy string
	// ID is the Fleet ID recorded on the CR by its discovery.
	ID string
	// Stale is whether the CR is marked stale.
	Stale bool
}

// Conflict is a Fleet object that gets no CR.
type Conflict struct {
	ID      string
	CRName  string
	Reason  fleetv1alpha1.ConflictReason
	Message string
}

// Plan is what one poll does.
type Plan struct {
	// Create are the Fleet objects that need a new CR.
	Create []Remote
	// Refresh are this discovery's CRs whose object is still found, paired with it.
	Refresh []Pair
	// Gone are this discovery's CRs whose object was not found.
	Gone []Existing
	// Conflicts are the objects that get no CR, sorted by ID.
	Conflicts []Conflict
}

// Pair is a CR of the discovery and the Fleet object it represents.
type Pair struct {
	CR     Existing
	Remote Remote
}

// Build plans one poll of the discovery self (ns/name). owned are the CRs this discovery created (found by their
// discovered-by record); atName returns the CR that exists under a name, if any. A CR is matched to its Fleet
// object by ID first, so an object whose derived name changed (a renamed pipeline) keeps its CR.
func Build(self string, remotes []Remote, owned []Existing, atName func(string) (Existing, bool)) Plan {
	var p Plan
	ownedByID := map[string]Existing{}
	for _, e := range owned {
		if _, dup := ownedByID[e.ID]; !dup || e.Name < ownedByID[e.ID].Name {
			ownedByID[e.ID] = e
		}
	}
	seen := map[string]bool{}
	claimed := map[string]string{} // CR name -> ID taken in this plan
	for _, r := range remotes {
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		if e, ok := ownedByID[r.ID]; ok {
			p.Refresh = append(p.Refresh, Pair{CR: e, Remote: r})
			claimed[e.Name] = r.ID
			continue
		}
		if r.Invalid != "" {
			p.Conflicts = append(p.Conflicts, Conflict{ID: r.ID, CRName: r.CRName, Reason: fleetv1alpha1.ConflictNameSanitizationFailed, Message: r.Invalid})
			continue
		}
		if other, ok := claimed[r.CRName]; ok {
			p.Conflicts = append(p.Conflicts, Conflict{ID: r.ID, CRName: r.CRName, Reason: fleetv1alpha1.ConflictNameSanitizationFailed,
				Message: fmt.Sprintf("the derived name %q is already used for Fleet ID %q", r.CRName, other)})
			continue
		}
		if e, ok := atName(r.CRName); ok {
			if c := Classify(self, r, e); c != nil {
				p.Conflicts = append(p.Conflicts, *c)
			}
			continue
		}
		claimed[r.CRName] = r.ID
		p.Create = append(p.Create, r)
	}
	for _, e := range owned {
		if !seen[e.ID] || ownedByID[e.ID].Name != e.Name {
			p.Gone = append(p.Gone, e)
		}
	}
	sort.Slice(p.Gone, func(i, j int) bool { return p.Gone[i].Name < p.Gone[j].Name })
	SortConflicts(p.Conflicts)
	return p
}

// SortConflicts orders conflicts by ID, so the first 100 kept in status are stable from poll to poll.
func SortConflicts(c []Conflict) {
	sort.Slice(c, func(i, j int) bool { return c[i].ID < c[j].ID })
}

// Classify says why the CR e, found under the name derived for r, is not r's CR: nil when it is (this
// discovery's, for the same ID — e.g. created by a poll the cache had not caught up with).
func Classify(self string, r Remote, e Existing) *Conflict {
	switch {
	case e.DiscoveredBy == "":
		return &Conflict{ID: r.ID, CRName: r.CRName, Reason: fleetv1alpha1.ConflictNotOwnedByDiscovery,
			Message: fmt.Sprintf("%q exists and was not created by a discovery; it is left alone", r.CRName)}
	case e.DiscoveredBy != self:
		return &Conflict{ID: r.ID, CRName: r.CRName, Reason: fleetv1alpha1.ConflictOwnedByOtherDiscovery,
			Message: fmt.Sprintf("%q was created by discovery %s", r.CRName, e.DiscoveredBy)}
	case e.ID != r.ID:
		// Ours by record but for another ID (a 20-bit suffix collision, or a hand-edited record).
		return &Conflict{ID: r.ID, CRName: r.CRName, Reason: fleetv1alpha1.ConflictNameSanitizationFailed,
			Message: fmt.Sprintf("the derived name %q is already used for Fleet ID %q", r.CRName, e.ID)}
	}
	return nil
}

// CapConflicts returns at most max conflicts and whether any were cut.
func CapConflicts(c []Conflict, max int) ([]Conflict, bool) {
	if len(c) <= max {
		return c, false
	}
	return c[:max], true
}
