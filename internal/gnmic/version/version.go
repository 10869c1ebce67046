// Package version tells which gNMIc collector version a Cluster runs and which features that version decodes.
package version

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a gNMIc release, major.minor.patch.
type Version struct {
	Major, Minor, Patch int
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor or later.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// TunnelTargetMatches is the first collector version whose config API decodes tunnel-target-matches: before
// 0.47 the apply request's field had no mapstructure tag, so collectors silently dropped the key.
var TunnelTargetMatches = Version{Minor: 47}

// Parse reads a version such as "0.47.0", "v0.47.1" or "v0.47.0-rc1" (a pre-release suffix is ignored).
func Parse(s string) (Version, error) {
	core := strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("%q is not a version (major.minor[.patch])", s)
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || len(p) > 6 {
			return Version{}, fmt.Errorf("%q is not a version (major.minor[.patch])", s)
		}
		nums[i] = n
	}
	return Version{Major: nums[0], Minor: nums[1], Patch: nums[2]}, nil
}

// FromImage reads the collector version from a container image reference's tag
// ("ghcr.io/openconfig/gnmic:0.47.0", "registry:5000/gnmic:v0.45.0@sha256:…"). ok is false when the image has
// no tag that is a version (a digest only, "latest", a branch name).
func FromImage(image string) (v Version, ok bool) {
	ref, _, _ := strings.Cut(image, "@")
	slash := strings.LastIndex(ref, "/")
	colon := strings.LastIndex(ref, ":")
	if colon <= slash {
		return Version{}, false
	}
	v, err := Parse(ref[colon+1:])
	return v, err == nil
}

// Feature is something a Cluster's collectors must decode.
type Feature struct {
	// Name as shown in conditions.
	Name string
	// Since is the first collector version that decodes it.
	Since Version
}

// Compare returns a description of why a feature cannot run on the image, or "" when it can. An image whose
// version cannot be read is assumed current: the operator cannot tell, and refusing would block every custom
// build.
func Compare(image string, f Feature) string {
	v, ok := FromImage(image)
	if !ok || v.AtLeast(f.Since.Major, f.Since.Minor) {
		return ""
	}
	return fmt.Sprintf("%s need gNMIc %d.%d or later; the Cluster's image runs %s", f.Name, f.Since.Major, f.Since.Minor, v)
}
