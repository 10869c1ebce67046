// Package discovery is the pure logic of PipelineDiscovery and CollectorDiscovery: deriving CR names from Fleet
// IDs and names, deciding which CRs to create, refresh, mark stale or delete, and which Fleet objects conflict
// with CRs the discovery does not own.
package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxBaseLength caps the readable part of a derived name, so that with the "-xxxxx" suffix it stays a valid
// DNS-1123 label (≤63), usable as a label value too.
const MaxBaseLength = 53

// CRName derives a Kubernetes object name from a Fleet collector ID or pipeline name: lowercased, every run of
// characters other than [a-z0-9] becomes one "-", leading and trailing "-" are trimmed, and the result is cut to
// 53 characters. When that changed anything, "-" and the first 5 hex digits of sha256(raw) are appended, so
// that two raw values that sanitise alike ("Edge_1" and "edge-1") still get different names. A raw value with
// nothing usable left becomes fallback plus the suffix.
func CRName(raw, fallback string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(raw) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.TrimRight(b.String(), "-")
	if len(base) > MaxBaseLength {
		base = strings.TrimRight(base[:MaxBaseLength], "-")
	}
	if base == raw && base != "" {
		return base
	}
	if base == "" {
		base = fallback
	}
	sum := sha256.Sum256([]byte(raw))
	return base + "-" + hex.EncodeToString(sum[:])[:5]
}

// CollectorCRName is the Collector CR name for a Fleet collector ID.
func CollectorCRName(id string) string { return CRName(id, "c") }

// PipelineCRName is the Pipeline CR name for a Fleet pipeline name.
func PipelineCRName(name string) string { return CRName(name, "p") }
