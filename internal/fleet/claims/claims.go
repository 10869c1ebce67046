// Package claims decides which of several Collector CRs that name one Fleet collector ID holds it: a collector ID
// is claimed by exactly one Collector cluster-wide, or two CRs would push competing attribute diffs.
package claims

import (
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// Holder returns the Collector that holds the ID among cs (all naming the same ID): CRs being deleted are left
// out unless nothing else remains, then the oldest wins, ties by namespace/name. It returns nil for none.
func Holder(cs []fleetv1alpha1.Collector) *fleetv1alpha1.Collector {
	live := make([]*fleetv1alpha1.Collector, 0, len(cs))
	for i := range cs {
		if cs[i].DeletionTimestamp.IsZero() {
			live = append(live, &cs[i])
		}
	}
	if len(live) == 0 {
		return nil
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i], live[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return live[0]
}

// Key is namespace/name.
func Key(c *fleetv1alpha1.Collector) string { return c.Namespace + "/" + c.Name }

// IDField is the field index of Collectors by spec.id, shared by the Collector controller and the admission check.
const IDField = "spec.id"

// IndexID is the IDField extractor.
func IndexID(o client.Object) []string {
	return []string{o.(*fleetv1alpha1.Collector).Spec.ID}
}
