// Package selector evaluates a PolicySelector against Collector CRs the way Fleet Management evaluates
// matchers: Alertmanager semantics (fully anchored regexes, unquoted values, a missing attribute is ""),
// matchers ANDed, then ORed with the collector ID list; an empty selector matches nothing.
package selector

import (
	"fmt"
	"maps"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// CollectorIDKey is the synthetic attribute holding a collector's ID.
const CollectorIDKey = "collector.id"

// Selector is a compiled PolicySelector.
type Selector struct {
	matchers []*fleetv1alpha1.Matcher
	ids      map[string]bool
}

// Compile parses the selector's matchers.
func Compile(s fleetv1alpha1.PolicySelector) (*Selector, error) {
	out := &Selector{ids: map[string]bool{}}
	for i, m := range s.Matchers {
		pm, err := fleetv1alpha1.ParseMatcher(m)
		if err != nil {
			return nil, fmt.Errorf("matchers[%d] %q: %w", i, m, err)
		}
		out.matchers = append(out.matchers, pm)
	}
	for _, id := range s.CollectorIDs {
		out.ids[id] = true
	}
	return out, nil
}

// Matches reports whether the collector with this ID and these attributes is selected.
func (s *Selector) Matches(id string, attrs map[string]string) bool {
	if s.ids[id] {
		return true
	}
	if len(s.matchers) == 0 {
		return false
	}
	for _, m := range s.matchers {
		if !m.Matches(attrs) {
			return false
		}
	}
	return true
}

// CollectorAttributes is what selectors see of a Collector CR: the attributes the collector reports about
// itself, the remote attributes of its own spec (not the effective ones, which policies feed: that would make a
// policy's match depend on other policies), and collector.id.
func CollectorAttributes(c *fleetv1alpha1.Collector) map[string]string {
	attrs := make(map[string]string, len(c.Status.LocalAttributes)+len(c.Spec.RemoteAttributes)+1)
	maps.Copy(attrs, c.Status.LocalAttributes)
	maps.Copy(attrs, c.Spec.RemoteAttributes)
	attrs[CollectorIDKey] = c.Spec.ID
	return attrs
}

// MatchesCollector evaluates the selector against a Collector CR.
func (s *Selector) MatchesCollector(c *fleetv1alpha1.Collector) bool {
	return s.Matches(c.Spec.ID, CollectorAttributes(c))
}
