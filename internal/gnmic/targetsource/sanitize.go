package targetsource

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxNameLength is the longest Kubernetes object name (a DNS subdomain).
const maxNameLength = 253

// hashSuffix is the first 8 hex digits of the SHA-256 of s.
func hashSuffix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// TargetName is the Target name of a device: "<ts>-<device>", lowercased, every character outside [a-z0-9.-]
// replaced by "-", runs of separators collapsed, separators trimmed from the ends. A name longer than 253 is cut
// and given an 8-hex SHA-256 suffix of the untruncated name; a device name with nothing usable left (e.g. only
// non-Latin letters) gets the suffix of the original name instead, so it still has a stable, distinct name.
func TargetName(source, device string) string {
	full := normaliseName(source + "-" + device)
	if normaliseName(device) == "" {
		full = normaliseName(source) + "-" + hashSuffix(device)
	}
	if len(full) <= maxNameLength {
		return full
	}
	suffix := hashSuffix(full)
	cut := strings.TrimRight(full[:maxNameLength-len(suffix)-1], ".-")
	return cut + "-" + suffix
}

func normaliseName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	var pending byte // separator waiting to be written: '-' or '.'
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			if pending != 0 && b.Len() > 0 {
				b.WriteByte(pending)
			}
			pending = 0
			b.WriteRune(r)
		case r == '.':
			pending = '.'
		default:
			if pending != '.' {
				pending = '-'
			}
		}
	}
	return b.String()
}

// SanitizedLabels is the outcome of sanitising a label set.
type SanitizedLabels struct {
	// Labels are the valid labels.
	Labels map[string]string
	// Annotations keep the originals of rewritten labels: operator.gnmic.dev/label.<key> with "/" in the key
	// turned into ".", value the original value, or "<original key>=<original value>" when the key was rewritten.
	Annotations map[string]string
	// Changed is true when any key or value was rewritten or dropped.
	Changed bool
}

// SanitizeLabels makes every label key and value valid. Valid keys keep their place; rewritten keys that collide
// with another key, or that cannot be made valid, are dropped. Keys are processed in sorted order.
func SanitizeLabels(in map[string]string, annotationPrefix string) SanitizedLabels {
	out := SanitizedLabels{Labels: make(map[string]string, len(in))}
	var rewritten []string
	for _, k := range sortedKeys(in) {
		if len(validation.IsQualifiedName(k)) == 0 {
			out.Labels[k] = ""
			continue
		}
		rewritten = append(rewritten, k)
	}
	original := map[string]string{} // sanitised key -> original key, for rewritten keys
	for _, k := range rewritten {
		nk := sanitizeKey(k)
		out.Changed = true
		if nk == "" {
			continue
		}
		if _, taken := out.Labels[nk]; taken {
			continue
		}
		out.Labels[nk] = ""
		original[nk] = k
	}
	for nk := range out.Labels {
		ok := nk
		if o, was := original[nk]; was {
			ok = o
		}
		v := in[ok]
		nv := SanitizeLabelValue(v)
		out.Labels[nk] = nv
		if nv == v && ok == nk {
			continue
		}
		out.Changed = true
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		note := v
		if ok != nk {
			note = ok + "=" + v
		}
		out.Annotations[labelAnnotationKey(annotationPrefix, nk)] = note
	}
	return out
}

// labelAnnotationKey is prefix+key with "/" turned into "."; a name part over 63 characters is cut and given a
// hash suffix.
func labelAnnotationKey(prefix, key string) string {
	slash := strings.Index(prefix, "/")
	domain, name := prefix[:slash+1], prefix[slash+1:]+strings.ReplaceAll(key, "/", ".")
	if len(name) > validation.LabelValueMaxLength {
		suffix := hashSuffix(name)
		name = strings.TrimRight(name[:validation.LabelValueMaxLength-len(suffix)-1], "-_.") + "-" + suffix
	}
	return domain + name
}

// SanitizeLabelValue turns every character outside [A-Za-z0-9-_.] into "-", cuts to 63 and strips
// non-alphanumeric characters from both ends.
func SanitizeLabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	return cleanSegment(v, validation.LabelValueMaxLength)
}

func cleanSegment(s string, maxLen int) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	out := b.String()
	if len(out) > maxLen {
		out = out[:maxLen]
	}
	return strings.TrimFunc(out, func(r rune) bool { return !isAlnum(r) })
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// sanitizeKey rewrites a label key into a valid qualified name, or returns "" when that is impossible.
func sanitizeKey(k string) string {
	prefix, name := "", k
	if i := strings.LastIndex(k, "/"); i >= 0 {
		prefix, name = k[:i], k[i+1:]
	}
	name = cleanSegment(name, validation.LabelValueMaxLength)
	if name == "" {
		return ""
	}
	if prefix != "" {
		prefix = normaliseName(prefix)
		if len(prefix) > maxNameLength {
			prefix = strings.TrimRight(prefix[:maxNameLength], ".-")
		}
		if prefix == "" {
			return ""
		}
		name = prefix + "/" + name
	}
	if len(validation.IsQualifiedName(name)) != 0 {
		return ""
	}
	return name
}
