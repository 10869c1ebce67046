package discovery

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

func TestBuild(t *testing.T) {
	const self = "team-a/disc"
	remote := func(id string) Remote { return Remote{ID: id, CRName: CollectorCRName(id)} }
	ours := func(name, id string) Existing { return Existing{Name: name, DiscoveredBy: self, ID: id} }
	cases := []struct {
		name     string
		remotes  []Remote
		owned    []Existing
		others   []Existing
		create   []string
		refresh  []string
		gone     []string
		conflict map[string]fleetv1alpha1.ConflictReason
	}{
		{name: "first poll creates everything", remotes: []Remote{remote("a"), remote("b")}, create: []string{"a", "b"}},
		{name: "known objects are refreshed", remotes: []Remote{remote("a")}, owned: []Existing{ours("a", "a")}, refresh: []string{"a"}},
		{name: "vanished objects are gone", remotes: []Remote{remote("a")}, owned: []Existing{ours("a", "a"), ours("b", "b")},
			refresh: []string{"a"}, gone: []string{"b"}},
		{name: "matched by ID even when the derived name changed", remotes: []Remote{{ID: "7", CRName: "new-name"}},
			owned: []Existing{ours("old-name", "7")}, refresh: []string{"old-name"}},
		{name: "a CR nobody discovered is a conflict", remotes: []Remote{remote("a")},
			others: []Existing{{Name: "a"}}, conflict: map[string]fleetv1alpha1.ConflictReason{"a": fleetv1alpha1.ConflictNotOwnedByDiscovery}},
		{name: "another discovery's CR is a conflict", remotes: []Remote{remote("a")},
			others:   []Existing{{Name: "a", DiscoveredBy: "team-b/disc", ID: "a"}},
			conflict: map[string]fleetv1alpha1.ConflictReason{"a": fleetv1alpha1.ConflictOwnedByOtherDiscovery}},
		{name: "our CR under the name for another ID is a sanitisation conflict", remotes: []Remote{{ID: "x", CRName: "a"}},
			others:   []Existing{ours("a", "y")},
			conflict: map[string]fleetv1alpha1.ConflictReason{"x": fleetv1alpha1.ConflictNameSanitizationFailed}},
		{name: "two objects deriving one name: the first wins", remotes: []Remote{{ID: "1", CRName: "n"}, {ID: "2", CRName: "n"}},
			create: []string{"1"}, conflict: map[string]fleetv1alpha1.ConflictReason{"2": fleetv1alpha1.ConflictNameSanitizationFailed}},
		{name: "an unusable object is a sanitisation conflict", remotes: []Remote{{ID: "1", CRName: "n", Invalid: "whitespace"}},
			conflict: map[string]fleetv1alpha1.ConflictReason{"1": fleetv1alpha1.ConflictNameSanitizationFailed}},
		{name: "duplicate remotes count once", remotes: []Remote{remote("a"), remote("a")}, create: []string{"a"}},
		{name: "two CRs of ours for one ID: one refreshed, the other gone", remotes: []Remote{remote("a")},
			owned: []Existing{ours("b", "a"), ours("a", "a")}, refresh: []string{"a"}, gone: []string{"b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			byName := map[string]Existing{}
			for _, e := range append(append([]Existing{}, tc.owned...), tc.others...) {
				byName[e.Name] = e
			}
			p := Build(self, tc.remotes, tc.owned, func(n string) (Existing, bool) { e, ok := byName[n]; return e, ok })
			var create, refresh, gone []string
			for _, r := range p.Create {
				create = append(create, r.ID)
			}
			for _, r := range p.Refresh {
				refresh = append(refresh, r.CR.Name)
			}
			for _, e := range p.Gone {
				gone = append(gone, e.Name)
			}
			conflicts := map[string]fleetv1alpha1.ConflictReason{}
			for _, c := range p.Conflicts {
				conflicts[c.ID] = c.Reason
				g.Expect(c.Message).NotTo(BeEmpty())
			}
			g.Expect(create).To(Equal(tc.create))
			g.Expect(refresh).To(Equal(tc.refresh))
			g.Expect(gone).To(Equal(tc.gone))
			if tc.conflict == nil {
				tc.conflict = map[string]fleetv1alpha1.ConflictReason{}
			}
			g.Expect(conflicts).To(Equal(tc.conflict))
		})
	}
}

func TestCapConflicts(t *testing.T) {
	g := NewWithT(t)
	var cs []Conflict
	for i := range 101 {
		cs = append(cs, Conflict{ID: fmt.Sprint(i)})
	}
	out, cut := CapConflicts(cs, 100)
	g.Expect(out).To(HaveLen(100))
	g.Expect(cut).To(BeTrue())
	out, cut = CapConflicts(cs[:100], 100)
	g.Expect(out).To(HaveLen(100))
	g.Expect(cut).To(BeFalse())
}
