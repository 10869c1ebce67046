package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MatchType is the operator of a matcher.
type MatchType string

// The four Alertmanager matcher operators.
const (
	MatchEqual    MatchType = "="
	MatchNotEqual MatchType = "!="
	MatchRegex    MatchType = "=~"
	MatchNotRegex MatchType = "!~"
)

// MaxMatchers and MaxMatcherLength bound a matcher list.
const (
	MaxMatchers      = 100
	MaxMatcherLength = 200
)

// Matcher is one parsed Prometheus/Alertmanager matcher, e.g. env="prod" or team=~"a|b".
// +kubebuilder:object:generate=false
type Matcher struct {
	Name  string
	Type  MatchType
	Value string
	re    *regexp.Regexp
}

// ParseMatcher parses name, operator and value. Values may be double-quoted (with Go escapes) or bare;
// regular expressions are fully anchored as in Alertmanager. "==" is rejected.
func ParseMatcher(s string) (*Matcher, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && isNameChar(s[i], i == 0) {
		i++
	}
	if i == 0 {
		return nil, fmt.Errorf("must start with a label name ([a-zA-Z_][a-zA-Z0-9_.]*), e.g. env=\"prod\"")
	}
	m := &Matcher{Name: s[:i]}
	rest := strings.TrimLeft(s[i:], " \t")
	switch {
	case strings.HasPrefix(rest, "=="):
		return nil, fmt.Errorf("operator \"==\" is not supported: use =, !=, =~ or !~")
	case strings.HasPrefix(rest, "=~"):
		m.Type = MatchRegex
	case strings.HasPrefix(rest, "!~"):
		m.Type = MatchNotRegex
	case strings.HasPrefix(rest, "!="):
		m.Type = MatchNotEqual
	case strings.HasPrefix(rest, "="):
		m.Type = MatchEqual
	default:
		return nil, fmt.Errorf("label name %q must be followed by =, !=, =~ or !~", m.Name)
	}
	raw := strings.TrimSpace(rest[len(m.Type):])
	if raw == "" {
		return nil, fmt.Errorf("missing value after %q", m.Name+string(m.Type))
	}
	if strings.HasPrefix(raw, `"`) {
		v, err := strconv.Unquote(raw)
		if err != nil {
			return nil, fmt.Errorf("value %s is not a valid double-quoted string", raw)
		}
		m.Value = v
	} else {
		if strings.ContainsAny(raw, `"`) {
			return nil, fmt.Errorf("unquoted value %q must not contain a double quote", raw)
		}
		m.Value = raw
	}
	if m.Type == MatchRegex || m.Type == MatchNotRegex {
		re, err := regexp.Compile("^(?:" + m.Value + ")$")
		if err != nil {
			return nil, fmt.Errorf("value %q is not a valid regular expression: %w", m.Value, err)
		}
		m.re = re
	}
	return m, nil
}

func isNameChar(c byte, first bool) bool {
	switch {
	case c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	case first:
		return false
	default:
		return c == '.' || c >= '0' && c <= '9'
	}
}

// Matches reports whether the attribute set satisfies the matcher; a missing attribute is the empty string.
func (m *Matcher) Matches(attrs map[string]string) bool {
	v := attrs[m.Name]
	switch m.Type {
	case MatchEqual:
		return v == m.Value
	case MatchNotEqual:
		return v != m.Value
	case MatchRegex:
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

// String renders the matcher in canonical form with a quoted value.
func (m *Matcher) String() string {
	return m.Name + string(m.Type) + strconv.Quote(m.Value)
}
