// Package devdial sends the operator's TCP connections to in-cluster peers (gNMIc collector pods, agents' MCP
// Services, Prometheus) to other addresses. It exists for development and tests only: there the pods are
// simulated (kwok runs no container) and the stand-ins listen on loopback. Only where the connection goes
// changes; the URL, the Host header and the TLS server name stay the in-cluster ones the operator built, so
// what is tested is the real address.
//
// The map is read once, at manager start, from QUARTET_DEV_DIAL_MAP (see Parse for the syntax and
// docs/development.md). Unset, every function here dials the address as given.
package devdial

import (
	"context"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// EnvVar holds the map; the QUARTET_DEV_ prefix is reserved for development-only switches.
const EnvVar = "QUARTET_DEV_DIAL_MAP"

// Map says where connections to listed addresses go. A nil *Map maps nothing. It is safe for concurrent use;
// Add lets a test register stand-ins it starts after the manager.
type Map struct {
	mu       sync.RWMutex
	exact    map[string]string // "host:port" → "addr:port"
	patterns []pattern         // in the order written; the first that matches wins
}

// pattern is a wildcard entry: "*" or "*.suffix" for the host, a port or "*" for any port.
type pattern struct {
	from   string // as written (normalized), for String and for Add's replacement
	host   string // one host ("name:*"); empty for a host pattern
	suffix string // ".svc" for "*.svc"; "" for "*" (every host)
	port   string // "" for "*" (every port)
	to     string // "addr:port", or "addr" alone to keep the dialed port
}

func (p pattern) matches(host, port string) bool {
	if p.port != "" && p.port != port {
		return false
	}
	if p.host != "" {
		return p.host == host
	}
	return p.suffix == "" || strings.HasSuffix(host, p.suffix)
}

// target is where to for a dialed port: to as written, or to with the dialed port.
func target(to, port string) string {
	if _, _, err := net.SplitHostPort(to); err == nil {
		return to
	}
	return net.JoinHostPort(to, port)
}

// Lookup returns where a connection to address ("host:port") goes and whether the map lists it. Exact entries
// win over patterns.
func (m *Map) Lookup(address string) (string, bool) {
	if m == nil {
		return "", false
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", false
	}
	host = normalizeHost(host)
	m.mu.RLock()
	defer m.mu.RUnlock()
	if to, ok := m.exact[net.JoinHostPort(host, port)]; ok {
		return target(to, port), true
	}
	for _, p := range m.patterns {
		if p.matches(host, port) {
			return target(p.to, port), true
		}
	}
	return "", false
}

// dialer is what every connection uses, mapped or not: http.DefaultTransport's settings.
var dialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}

// DialContext is a net.Dialer.DialContext that connects to where the map sends address (the address itself
// when it is not listed, or when m is nil).
func (m *Map) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if to, ok := m.Lookup(address); ok {
		address = to
	}
	return dialer.DialContext(ctx, network, address)
}

// Transport returns a clone of http.DefaultTransport that dials through m. With a nil Map it is the plain clone:
// production pays nothing. A mapped address is dialed directly, never through HTTP_PROXY.
func (m *Map) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if m == nil {
		return t
	}
	t.DialContext = m.DialContext
	proxy := t.Proxy
	t.Proxy = func(req *http.Request) (*url.URL, error) {
		if _, ok := m.Lookup(hostPort(req.URL)); ok || proxy == nil {
			return nil, nil
		}
		return proxy(req)
	}
	return t
}

// HTTPClient returns an http.Client on Transport().
func (m *Map) HTTPClient() *http.Client { return &http.Client{Transport: m.Transport()} }

// hostPort is the address a request to u dials, with the scheme's default port.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Empty reports whether the map lists nothing.
func (m *Map) Empty() bool {
	if m == nil {
		return true
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.exact) == 0 && len(m.patterns) == 0
}

// String returns the entries in the variable's syntax: exact ones sorted, then the patterns in order.
func (m *Map) String() string {
	if m == nil {
		return ""
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var parts []string
	for _, from := range slices.Sorted(maps.Keys(m.exact)) {
		parts = append(parts, from+"="+m.exact[from])
	}
	for _, p := range m.patterns {
		parts = append(parts, p.from+"="+p.to)
	}
	return strings.Join(parts, ",")
}
