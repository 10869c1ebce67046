package inventory

import (
	"testing"

	. "github.com/onsi/gomega"
)

// oldFormat is an inventory as the first format stored it: apiVersion in every entry, keyed with the version,
// so an object whose apiVersion changed sits in objects and prune at once.
var oldFormat = map[string]string{
	"commit": "abc",
	"objects": `[{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","namespace":"a","name":"web"},` +
		`{"apiVersion":"v1","kind":"ConfigMap","namespace":"a","name":"c"}]`,
	"prune": `[{"apiVersion":"autoscaling/v1","kind":"HorizontalPodAutoscaler","namespace":"a","name":"web"},` +
		`{"apiVersion":"v1","kind":"Secret","namespace":"a","name":"gone"}]`,
}

func TestParseMigratesTheOldFormat(t *testing.T) {
	g := NewWithT(t)
	inv, err := parse(oldFormat)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inv.Commit).To(Equal("abc"))
	g.Expect(inv.Objects).To(HaveLen(2))
	// The HPA is live under v2: its old-version twin is no longer a prune candidate.
	g.Expect(inv.Prune).To(ConsistOf(HaveField("Kind", "Secret")))

	data := format(inv)
	g.Expect(data).To(HaveKeyWithValue("format", Format))
	back, err := parse(data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Commit).To(Equal(inv.Commit))
	g.Expect(Minus(back.Objects, inv.Objects)).To(BeEmpty())
	g.Expect(Minus(inv.Objects, back.Objects)).To(BeEmpty())
	g.Expect(back.Objects).To(ContainElement(HaveField("ApiVersion", "autoscaling/v2")))
	g.Expect(back.Prune).To(ConsistOf(HaveField("Name", "gone")))
}

func TestParseRejectsBadInput(t *testing.T) {
	g := NewWithT(t)
	for _, data := range []map[string]string{
		{"objects": "{"},
		{"format": "9", "objects": "[]"},
		{"format": Format, "objects": `[{"kind":"ConfigMap","name":"x"}]`},
		{"format": Format, "objects": `[{"group":"","kind":"","version":"v1","name":"x"}]`},
	} {
		_, err := parse(data)
		g.Expect(err).To(HaveOccurred(), "%v", data)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(oldFormat["objects"], "")
	f.Add(`[{"group":"apps","version":"v1","kind":"Deployment","namespace":"a","name":"w"}]`, Format)
	f.Fuzz(func(t *testing.T, objects, version string) {
		inv, err := parse(map[string]string{"objects": objects, "format": version})
		if err != nil {
			return
		}
		// Whatever parses is written in the current format and reads back to the same set.
		back, err := parse(format(inv))
		if err != nil {
			t.Fatalf("re-reading %v: %v", inv.Objects, err)
		}
		if len(Minus(back.Objects, inv.Objects))+len(Minus(inv.Objects, back.Objects)) != 0 {
			t.Fatalf("round trip changed the set: %v → %v", inv.Objects, back.Objects)
		}
	})
}
