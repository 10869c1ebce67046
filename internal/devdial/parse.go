package devdial

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// Parse reads a comma-separated list of entries "from=to":
//
//	gnmic-core-0.gnmic-core.default.svc.cluster.local:7890=127.0.0.1:41234   one address to another
//	planner.team-a.svc:8080=127.0.0.1                                        the same, keeping the port
//	*.svc:*=127.0.0.1                                                        every host ending in .svc, any port, kept
//	*:9090=127.0.0.1:19090                                                   every host on port 9090
//
// A host pattern is "*" or "*.suffix"; a port pattern is "*", and then the target names no port (the dialed
// one is kept). Exact entries win over patterns; among patterns the first written that matches wins. Host names
// are compared case-insensitively. An empty string is an empty map. Errors name the offending entry.
func Parse(s string) (*Map, error) {
	m := &Map{exact: map[string]string{}}
	seen := map[string]bool{}
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		from, to, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", EnvVar, entry, err)
		}
		if seen[from.from] {
			return nil, fmt.Errorf("%s entry %q: %s is mapped twice", EnvVar, entry, from.from)
		}
		seen[from.from] = true
		if from.exact {
			m.exact[from.from] = to
		} else {
			m.patterns = append(m.patterns, pattern{from: from.from, host: from.host, suffix: from.suffix, port: from.port, to: to})
		}
	}
	return m, nil
}

// FromEnv parses QUARTET_DEV_DIAL_MAP. Unset or blank, it returns nil: connections go where they are addressed.
func FromEnv() (*Map, error) {
	s := strings.TrimSpace(os.Getenv(EnvVar))
	if s == "" {
		return nil, nil
	}
	return Parse(s)
}

// Add parses entries (Parse's syntax) into m, replacing the target of an address or pattern already listed.
// Tests use it for stand-ins started after the manager, whose ports are known only then.
func (m *Map) Add(entries string) error {
	more, err := Parse(entries)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.exact == nil {
		m.exact = map[string]string{}
	}
	for from, to := range more.exact {
		m.exact[from] = to
	}
	for _, p := range more.patterns {
		replaced := false
		for i := range m.patterns {
			if m.patterns[i].from == p.from {
				m.patterns[i], replaced = p, true
			}
		}
		if !replaced {
			m.patterns = append(m.patterns, p)
		}
	}
	return nil
}

// source is the parsed left side of an entry.
type source struct {
	from   string // normalized "host:port" as written
	exact  bool
	host   string // patterns of one host on every port
	suffix string // patterns: ".svc", or "" for every host
	port   string // patterns: "" for every port
}

func parseEntry(entry string) (source, string, error) {
	left, right, ok := strings.Cut(entry, "=")
	if !ok {
		return source{}, "", errors.New("want from=to, e.g. name.ns.svc:8080=127.0.0.1:41234")
	}
	from, err := parseSource(strings.TrimSpace(left))
	if err != nil {
		return source{}, "", err
	}
	right = strings.TrimSpace(right)
	to, keepsPort, err := parseTarget(right)
	if err != nil {
		return source{}, "", err
	}
	if !from.exact && from.port == "" && !keepsPort {
		return source{}, "", fmt.Errorf("%s matches every port: the target %q must name a host only (the port is kept)", from.from, right)
	}
	return from, to, nil
}

func parseSource(s string) (source, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return source{}, fmt.Errorf("from %q: want host:port, *.suffix:port or *.suffix:*", s)
	}
	host = normalizeHost(host)
	src := source{from: net.JoinHostPort(host, port), exact: true}
	if port == "*" {
		src.exact = false
	} else if err := checkPort(port); err != nil {
		return source{}, fmt.Errorf("from %q: %w", s, err)
	} else {
		src.port = port
	}
	switch {
	case host == "*":
		src.exact = false
	case strings.HasPrefix(host, "*."):
		src.exact, src.suffix = false, host[1:]
		if err := checkHost(host[2:]); err != nil {
			return source{}, fmt.Errorf("from %q: %w", s, err)
		}
	default:
		if err := checkHost(host); err != nil {
			return source{}, fmt.Errorf("from %q: %w", s, err)
		}
		if !src.exact {
			src.host = host
		}
	}
	return src, nil
}

// parseTarget accepts "addr:port" or "addr" (keepsPort).
func parseTarget(s string) (to string, keepsPort bool, err error) {
	if host, port, splitErr := net.SplitHostPort(s); splitErr == nil {
		if err := checkHost(host); err != nil {
			return "", false, fmt.Errorf("to %q: %w", s, err)
		}
		if err := checkPort(port); err != nil {
			return "", false, fmt.Errorf("to %q: %w", s, err)
		}
		return net.JoinHostPort(normalizeHost(host), port), false, nil
	}
	host := strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if err := checkHost(host); err != nil {
		return "", false, fmt.Errorf("to %q: want address:port or address: %w", s, err)
	}
	return normalizeHost(host), true, nil
}

func checkPort(port string) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	return nil
}

// checkHost accepts an IP address or a DNS name (letters, digits, '-' and '.', labels of 1-63 characters).
func checkHost(host string) error {
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("host %q: want an IP address or a DNS name", host)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return fmt.Errorf("host %q: want an IP address or a DNS name", host)
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '-' {
				return fmt.Errorf("host %q: want an IP address or a DNS name", host)
			}
		}
	}
	return nil
}

// normalizeHost lower-cases a name and drops the root dot, so foo.svc., FOO.svc and foo.svc are one host.
func normalizeHost(host string) string {
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}
