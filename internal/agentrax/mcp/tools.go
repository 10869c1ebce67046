package mcp

import (
	"slices"
	"strings"
)

// MergeTools returns the names of the discovered tools and the tools declared in the spec, de-duplicated and
// sorted, so that the same inputs always give the same registry entry (and no spurious ConfigMap write).
// Empty and whitespace-only names are dropped.
func MergeTools(discovered []Tool, declared []string) []string {
	out := make([]string, 0, len(discovered)+len(declared))
	for _, t := range discovered {
		out = append(out, strings.TrimSpace(t.Name))
	}
	for _, n := range declared {
		out = append(out, strings.TrimSpace(n))
	}
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
