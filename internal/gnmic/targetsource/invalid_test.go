package targetsource

import (
	"testing"

	. "github.com/onsi/gomega"
)

// Invalid devices feed the prune guard: a named one keeps its Target, an unnamed one holds every deletion.
func TestInvalidDevicesKeepTheirTargetsAndHoldDeletions(t *testing.T) {
	g := NewWithT(t)
	failures := []Failure{{Name: "R2", Reason: MappingErrorReason("address")}, {Name: "r1", Reason: ReasonDuplicateName},
		{Reason: ReasonNotAnObject}}
	g.Expect(KeptTargets("inv", failures)).To(Equal(map[string]bool{"inv-r2": true}))
	g.Expect(Unnamed(failures)).To(Equal(1))
	g.Expect(PruneGuard(GuardInput{Discovered: 4, MaxDeleteRatio: 50, Managed: 4, Deletions: 1, Unnamed: 1})).To(Equal(GuardInvalidDevices))
	g.Expect(PruneGuard(GuardInput{Discovered: 4, MaxDeleteRatio: 50, Managed: 4, Deletions: 0, Unnamed: 1})).To(BeEmpty())
	g.Expect(PruneGuard(GuardInput{Truncated: true, Deletions: 1, Unnamed: 1})).To(Equal(GuardTruncated))
}
