// Package attributes holds the pure logic of collector remote attributes: RFC 6901 paths for
// BulkUpdateCollectors, the precedence between the objects that claim attributes, and the diff that turns the
// desired attributes into operations.
package attributes

import (
	"fmt"
	"strings"
)

// PathPrefix is the JSON pointer prefix of a collector's remote attributes.
const PathPrefix = "/remote_attributes/"

var (
	escaper   = strings.NewReplacer("~", "~0", "/", "~1")
	unescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// EscapeToken escapes one reference token per RFC 6901: "~" becomes "~0" and "/" becomes "~1".
func EscapeToken(s string) string { return escaper.Replace(s) }

// UnescapeToken reverses EscapeToken, rejecting a "~" not followed by 0 or 1.
func UnescapeToken(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 == len(s) || (s[i+1] != '0' && s[i+1] != '1')) {
			return "", fmt.Errorf("invalid JSON pointer escape at offset %d in %q: ~ must be followed by 0 or 1", i, s)
		}
	}
	return unescaper.Replace(s), nil
}

// Path is the JSON pointer of the remote attribute key.
func Path(key string) string { return PathPrefix + EscapeToken(key) }

// ParsePath returns the attribute key a pointer names; it must be /remote_attributes/<one token>.
func ParsePath(p string) (string, error) {
	rest, ok := strings.CutPrefix(p, PathPrefix)
	if !ok {
		return "", fmt.Errorf("path %q must start with %s", p, PathPrefix)
	}
	if strings.Contains(rest, "/") {
		return "", fmt.Errorf("path %q must name one attribute (escape / in keys as ~1)", p)
	}
	key, err := UnescapeToken(rest)
	if err != nil {
		return "", err
	}
	if key == "" {
		return "", fmt.Errorf("path %q names an empty key", p)
	}
	return key, nil
}
