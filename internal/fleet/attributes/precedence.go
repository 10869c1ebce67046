package attributes

import (
	"sort"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// Claim is one object's wish for a collector's remote attributes.
type Claim struct {
	// Kind is Collector, RemoteAttributePolicy or ExternalAttributeSync.
	Kind fleetv1alpha1.OwnerKind
	// Name is the owner as namespace/name.
	Name string
	// Priority orders RemoteAttributePolicies (higher wins); other kinds ignore it.
	Priority int32
	// Truncated marks an ExternalAttributeSync whose ownership record overflowed: it is ignored (fail closed).
	Truncated bool
	// Attributes are the keys and values claimed.
	Attributes map[string]string
}

// rank orders kinds: a lower rank wins. ExternalAttributeSync beats the Collector's own spec, which beats
// RemoteAttributePolicies.
func rank(k fleetv1alpha1.OwnerKind) int {
	switch k {
	case fleetv1alpha1.OwnerExternalAttributeSync:
		return 0
	case fleetv1alpha1.OwnerCollector:
		return 1
	default:
		return 2
	}
}

// wins reports whether claim a takes precedence over b.
func wins(a, b *Claim) bool {
	if ra, rb := rank(a.Kind), rank(b.Kind); ra != rb {
		return ra < rb
	}
	if a.Kind == fleetv1alpha1.OwnerRemoteAttributePolicy && a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return a.Name < b.Name
}

// Resolve merges the claims into the effective attributes and their owners (sorted by key). For each key the
// winning claim is: any ExternalAttributeSync (first by namespace/name; truncated ones ignored), else the
// Collector spec, else the RemoteAttributePolicy with the highest priority (ties: first by namespace/name).
func Resolve(claims []Claim) (map[string]string, []fleetv1alpha1.AttributeOwner) {
	winner := map[string]*Claim{}
	for i := range claims {
		c := &claims[i]
		if c.Kind == fleetv1alpha1.OwnerExternalAttributeSync && c.Truncated {
			continue
		}
		for k := range c.Attributes {
			if cur, ok := winner[k]; !ok || wins(c, cur) {
				winner[k] = c
			}
		}
	}
	if len(winner) == 0 {
		return nil, nil
	}
	effective := make(map[string]string, len(winner))
	owners := make([]fleetv1alpha1.AttributeOwner, 0, len(winner))
	for k, c := range winner {
		effective[k] = c.Attributes[k]
		owners = append(owners, fleetv1alpha1.AttributeOwner{Key: k, OwnerKind: c.Kind, OwnerName: c.Name, Value: c.Attributes[k]})
	}
	sort.Slice(owners, func(i, j int) bool { return owners[i].Key < owners[j].Key })
	return effective, owners
}
