package attributes

import (
	"sort"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// Diff returns the BulkUpdateCollectors operations that bring the remote attributes in line with desired: ADD for
// a desired key Fleet lacks, REPLACE for one whose value differs, and REMOVE only for a key this CR owned before
// (previous) that is no longer desired and is still in Fleet. Keys nobody here ever owned are never touched.
// Operations come sorted by key, so equal inputs give equal requests.
func Diff(desired map[string]string, previous []fleetv1alpha1.AttributeOwner, remote map[string]string) []*collectorv1.Operation {
	var ops []*collectorv1.Operation
	for _, k := range sortedKeys(desired) {
		v := desired[k]
		cur, ok := remote[k]
		switch {
		case !ok:
			ops = append(ops, &collectorv1.Operation{Op: collectorv1.Operation_ADD, Path: Path(k), Value: &v})
		case cur != v:
			ops = append(ops, &collectorv1.Operation{Op: collectorv1.Operation_REPLACE, Path: Path(k), Value: &v})
		}
	}
	removed := map[string]bool{}
	for _, o := range previous {
		if _, want := desired[o.Key]; want || removed[o.Key] {
			continue
		}
		if _, ok := remote[o.Key]; ok {
			removed[o.Key] = true
		}
	}
	for _, k := range sortedKeys(removed) {
		ops = append(ops, &collectorv1.Operation{Op: collectorv1.Operation_REMOVE, Path: Path(k)})
	}
	return ops
}

// RemoveOwned returns REMOVE operations for every previously owned key still present in Fleet (the cleanup when
// the Collector CR is deleted).
func RemoveOwned(previous []fleetv1alpha1.AttributeOwner, remote map[string]string) []*collectorv1.Operation {
	return Diff(nil, previous, remote)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// HandedOff narrows what a deleting Collector may remove once another Collector holds its collector ID: not a key
// the successor owns (successorKeys, from its status.attributeOwners), and not a key whose value in Fleet is no
// longer the one this Collector wrote (someone, likely the successor before its status caught up, rewrote it).
// A finalizer retrying after the hand-off therefore never strips what the new holder wrote.
func HandedOff(previous []fleetv1alpha1.AttributeOwner, successorKeys map[string]bool, remote map[string]string) []fleetv1alpha1.AttributeOwner {
	var out []fleetv1alpha1.AttributeOwner
	for _, o := range previous {
		if v, ok := remote[o.Key]; successorKeys[o.Key] || (ok && v != o.Value) {
			continue
		}
		out = append(out, o)
	}
	return out
}
