package netguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is wrapped by every refusal, so callers can tell a guarded address from a network failure.
var ErrBlocked = errors.New("address blocked by the SSRF guard")

// MaxRedirects bounds a redirect chain.
const MaxRedirects = 5

// Guard checks hosts and dialled addresses. The zero value blocks every special-purpose range.
type Guard struct {
	allow    []netip.Prefix
	resolver *net.Resolver
}

// Option configures a Guard.
type Option func(*Guard)

// AllowPrefixesForTesting exempts the prefixes from the guard. It exists so tests can reach httptest servers on
// 127.0.0.1; the operator never passes it.
func AllowPrefixesForTesting(p ...netip.Prefix) Option {
	return func(g *Guard) { g.allow = append(g.allow, p...) }
}

// AllowPrefixes exempts ranges the cluster administrator chose (--external-source-allow-cidrs), e.g. the
// private network of an inventory database. Check them with CheckAllowedPrefix first.
func AllowPrefixes(p ...netip.Prefix) Option {
	return func(g *Guard) { g.allow = append(g.allow, p...) }
}

// neverAllowed are the ranges an administrator cannot exempt: they reach the operator's own node or the cloud
// metadata service, never an inventory.
var neverAllowed = []blockedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("::/127"), "unspecified or loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
}

// CheckAllowedPrefix refuses an administrator exemption that would overlap loopback, link-local (the cloud
// metadata address) or this-network, or that is not a prefix in canonical form.
func CheckAllowedPrefix(p netip.Prefix) error {
	if !p.IsValid() || p != p.Masked() {
		return fmt.Errorf("%s is not a network prefix (write it as %s)", p, p.Masked())
	}
	if p.Addr().Is4In6() {
		return fmt.Errorf("%s: write IPv4 prefixes in IPv4 form", p)
	}
	for _, n := range neverAllowed {
		if n.prefix.Overlaps(p) {
			return fmt.Errorf("%s overlaps %s (%s), which cannot be exempted from the SSRF guard", p, n.prefix, n.why)
		}
	}
	return nil
}

// WithResolver makes dials resolve names with r (tests point it at a local DNS server).
func WithResolver(r *net.Resolver) Option {
	return func(g *Guard) { g.resolver = r }
}

// New returns a Guard.
func New(opts ...Option) *Guard {
	g := &Guard{}
	for _, o := range opts {
		o(g)
	}
	return g
}

// CheckHost is the admission-time check of a URL host (no port, brackets allowed): IP literals in a blocked range
// and in-cluster, local or numeric-shorthand names are refused. A name that passes may still resolve to a blocked
// address; the dial-time check catches that.
func (g *Guard) CheckHost(host string) error {
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(h); err == nil {
		if why := blockedReason(ip, g.allow); why != "" {
			return fmt.Errorf("%w: %s is %s", ErrBlocked, h, why)
		}
		return nil
	}
	if strings.Contains(h, "%") {
		return fmt.Errorf("%w: %q has an IPv6 zone but is not an IPv6 address", ErrBlocked, h)
	}
	if why := blockedName(h); why != "" {
		return fmt.Errorf("%w: %q is a %s", ErrBlocked, h, why)
	}
	return nil
}

// CheckURL parses raw and checks it is http or https, carries no user info and has an allowed host.
func (g *Guard) CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.User != nil {
		return nil, errors.New("credentials in the URL are not allowed: use the Secret")
	}
	if u.Hostname() == "" {
		return nil, errors.New("URL has no host")
	}
	if err := g.CheckHost(u.Hostname()); err != nil {
		return nil, err
	}
	return u, nil
}

// Control is a net.Dialer Control function: it runs after the name was resolved and before connect, so it sees
// the very IP the socket is about to reach, on every dial.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return fmt.Errorf("%w: network %q", ErrBlocked, network)
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse dialled address %q", ErrBlocked, address)
	}
	if why := blockedReason(ap.Addr(), g.allow); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrBlocked, ap.Addr(), why)
	}
	return nil
}

// Dialer returns a dialer that checks every resolved address.
func (g *Guard) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: g.Control, Resolver: g.resolver}
}

// DialContext dials through the guard; a name is also checked before resolution.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		// A Unix socket (a database DSN may name one) reaches whatever listens on this host.
		return nil, fmt.Errorf("%w: network %q (%s)", ErrBlocked, network, address)
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	if err := g.CheckHost(host); err != nil {
		return nil, err
	}
	return g.Dialer(10*time.Second).DialContext(ctx, network, address)
}

// CheckRedirect refuses redirect chains longer than MaxRedirects, redirects to anything but http(s), and
// redirects to blocked hosts (the dial check still applies to whatever those names resolve to).
func (g *Guard) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= MaxRedirects {
		return fmt.Errorf("stopped after %d redirects", MaxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect to scheme %q", ErrBlocked, req.URL.Scheme)
	}
	if len(via) > 0 && via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect from https to plain http", ErrBlocked)
	}
	return g.CheckHost(req.URL.Hostname())
}

// Client returns an HTTP client whose every connection goes through the guard. Proxies are disabled: through a
// proxy the dial check would see the proxy's address, not the target's.
func (g *Guard) Client(timeout time.Duration, tlsConfig *tls.Config) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           g.DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: g.CheckRedirect}
}

// Lookup resolves host (a name or an IP literal) the way a dial through the guard would and returns the first
// address the guard allows, or an error wrapping ErrBlocked when none is. A caller that cannot dial through the
// guard (a protocol library with its own dialer) connects to the returned literal instead of the name, so the
// address it reaches is the one checked: a name re-pointed after the check changes nothing.
func (g *Guard) Lookup(ctx context.Context, host string) (netip.Addr, error) {
	if err := g.CheckHost(host); err != nil {
		return netip.Addr{}, err
	}
	h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(h); err == nil {
		return ip.Unmap(), nil
	}
	r := g.resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", h)
	if err != nil {
		return netip.Addr{}, err
	}
	var why []string
	for _, a := range addrs {
		if reason := blockedReason(a, g.allow); reason != "" {
			why = append(why, a.String()+" is "+reason)
			continue
		}
		return a.Unmap(), nil
	}
	return netip.Addr{}, fmt.Errorf("%w: %s resolves only to refused addresses (%s)", ErrBlocked, h, strings.Join(why, "; "))
}

// ParseAllowedPrefixes parses a comma-separated list of administrator exemptions (an allow-CIDR flag), each
// checked with CheckAllowedPrefix.
func ParseAllowedPrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err == nil {
			err = CheckAllowedPrefix(p)
		}
		if err != nil {
			return nil, fmt.Errorf("%q: %w", c, err)
		}
		out = append(out, p)
	}
	return out, nil
}
