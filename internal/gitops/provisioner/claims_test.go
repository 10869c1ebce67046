package provisioner

import (
	"testing"

	. "github.com/onsi/gomega"
)

// The claim-conflict annotation is read back to update it: what formatSegments writes, parseSegments reads, and
// text it did not write is dropped rather than misread.
func TestClaimSegmentsRoundTrip(t *testing.T) {
	g := NewWithT(t)
	segs := []segment{
		{object: "ConfigMap team/shared", other: "a"},
		{object: "Secret team/db", other: "b", owner: true},
		{object: "ClusterRole reader", other: "web.v2", owner: true},
	}
	v := formatSegments("team", segs)
	g.Expect(v).To(Equal("ClusterRole reader: source target team/web.v2 declares it too (its events are refused); " +
		"ConfigMap team/shared: source target team/a deploys it too; " +
		"Secret team/db: source target team/b declares it too (its events are refused)"))
	g.Expect(parseSegments(v)).To(ConsistOf(segs))
	g.Expect(parseSegments("")).To(BeEmpty())
	g.Expect(parseSegments("edited by hand; ConfigMap team/x: source target team/a deploys it too")).To(
		ConsistOf(segment{object: "ConfigMap team/x", other: "a"}))
	g.Expect(formatSegments("team", append(segs[:1:1], segs[0]))).To(
		Equal("ConfigMap team/shared: source target team/a deploys it too"), "duplicates collapse")
}
