package discovery

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestRetire(t *testing.T) {
	e := func(id string) Existing { return Existing{Name: "cr-" + id, ID: id} }
	cases := []struct {
		name        string
		gone        []Existing
		present     []string
		total       int
		managed     int
		deleteGone  bool
		wantDelete  []string
		wantStale   []string
		wantStalled bool
	}{
		{name: "gone from Fleet is deleted under Delete", gone: []Existing{e("a")}, present: []string{"b"}, total: 1, managed: 2,
			deleteGone: true, wantDelete: []string{"a"}},
		{name: "only deselected is marked stale under Delete", gone: []Existing{e("a")}, present: []string{"a", "b"}, total: 2, managed: 2,
			deleteGone: true, wantStale: []string{"a"}},
		{name: "mixed: each by its own presence", gone: []Existing{e("a"), e("b")}, present: []string{"b"}, total: 1, managed: 3,
			deleteGone: true, wantDelete: []string{"a"}, wantStale: []string{"b"}},
		{name: "Keep marks everything stale", gone: []Existing{e("a"), e("b")}, present: []string{"b"}, total: 1, managed: 2,
			wantStale: []string{"a", "b"}},
		{name: "an empty Fleet list with managed CRs stalls and deletes nothing", gone: []Existing{e("a"), e("b")}, total: 0, managed: 2,
			deleteGone: true, wantStalled: true},
		{name: "an empty Fleet list under Keep stalls too", gone: []Existing{e("a")}, total: 0, managed: 1, wantStalled: true},
		{name: "an empty Fleet list with nothing managed is fine", total: 0, managed: 0, deleteGone: true},
		{name: "nothing gone, nothing to do", present: []string{"a"}, total: 1, managed: 1, deleteGone: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			present := map[string]bool{}
			for _, id := range tc.present {
				present[id] = true
			}
			r := Retire(tc.gone, tc.total, tc.managed, func(id string) bool { return present[id] }, tc.deleteGone)
			var del, stale []string
			for _, x := range r.Delete {
				del = append(del, x.ID)
			}
			for _, x := range r.Stale {
				stale = append(stale, x.ID)
			}
			g.Expect(r.EmptyResult).To(Equal(tc.wantStalled))
			g.Expect(del).To(Equal(tc.wantDelete))
			g.Expect(stale).To(Equal(tc.wantStale))
		})
	}
}
