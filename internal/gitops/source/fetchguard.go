package source

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitclient "github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// Repository fetches go through internal/netguard: a tenant chooses its repository URL, so without the guard the
// source handler would fetch from the cloud metadata service, the node's loopback or in-cluster services for it.
// Each protocol is checked where the address is final:
//   - http(s): every connection is dialled through the guard (the resolved address, so a name re-pointed after
//     admission is caught) and every redirect is checked again;
//   - git://: the host is resolved and checked once, and go-git connects to that address literal (its git
//     transport has no dialer hook), so no second resolution can lead elsewhere;
//   - ssh: the address the connection reached is checked before the host key is accepted, so no credential is
//     ever sent to a refused address;
//   - any other scheme (file://, a local path) is refused.

// fetchGuardKey carries the guard of one fetch in its context.
type fetchGuardKey struct{}

// WithFetchGuard returns ctx whose repository fetches go through g.
func WithFetchGuard(ctx context.Context, g *netguard.Guard) context.Context {
	return context.WithValue(ctx, fetchGuardKey{}, g)
}

// fetchGuard is ctx's guard; without one, every special-purpose range is refused.
func fetchGuard(ctx context.Context) *netguard.Guard {
	if g, ok := ctx.Value(fetchGuardKey{}).(*netguard.Guard); ok && g != nil {
		return g
	}
	return defaultGuard
}

var defaultGuard = netguard.New()

// guardedTransports keeps one HTTP transport (and connection pool) per guard: a connection dialled under one
// guard's exemptions is never reused under another's.
var guardedTransports sync.Map // *netguard.Guard -> *http.Transport

type guardedRoundTripper struct{}

func (guardedRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	g := fetchGuard(req.Context())
	tr, ok := guardedTransports.Load(g)
	if !ok {
		// Proxies are off: through a proxy the dial check would see the proxy's address, not the repository's.
		tr, _ = guardedTransports.LoadOrStore(g, &http.Transport{Proxy: nil, DialContext: g.DialContext,
			TLSHandshakeTimeout: 10 * time.Second, MaxIdleConns: 16, IdleConnTimeout: 90 * time.Second,
			ForceAttemptHTTP2: true})
	}
	return tr.(*http.Transport).RoundTrip(req)
}

var installGuardedHTTP sync.Once

// installFetchGuard makes go-git's http and https transports dial through the guard of each request's context.
// go-git chooses transports process-wide, so the guard travels in the context instead.
func installFetchGuard() {
	installGuardedHTTP.Do(func() {
		c := githttp.NewClient(&http.Client{Transport: guardedRoundTripper{},
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				return fetchGuard(req.Context()).CheckRedirect(req, via)
			}})
		gitclient.InstallProtocol("http", c)
		gitclient.InstallProtocol("https", c)
	})
}

// guardedURL checks a repository URL before a fetch and returns the URL to hand to go-git (git:// with the
// checked address in place of the name). local lets file:// and local paths through (package tests only).
func guardedURL(ctx context.Context, raw string, local bool) (string, error) {
	installFetchGuard()
	g := fetchGuard(ctx)
	ep, err := transport.NewEndpoint(raw)
	if err != nil {
		return "", fmt.Errorf("repository URL %s: %w", pipeline.RedactURL(raw), err)
	}
	switch ep.Protocol {
	case "file":
		if local {
			return raw, nil
		}
	case "http", "https", "ssh":
		if err := g.CheckHost(ep.Host); err != nil {
			return "", fmt.Errorf("repository %s: %w", pipeline.RedactURL(raw), err)
		}
		return raw, nil
	case "git":
		ip, err := g.Lookup(ctx, ep.Host)
		if err != nil {
			return "", fmt.Errorf("repository %s: %w", pipeline.RedactURL(raw), err)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return "", fmt.Errorf("repository URL %s: %w", pipeline.RedactURL(raw), err)
		}
		port := ep.Port
		if port <= 0 {
			port = 9418
		}
		// git:// carries no credentials (and the error text must not gain any the redaction would miss).
		u.User = nil
		u.Host = netip.AddrPortFrom(ip, uint16(port)).String()
		return u.String(), nil
	}
	return "", fmt.Errorf("repository %s: %w: scheme %q (want https, http, ssh or git)", pipeline.RedactURL(raw),
		netguard.ErrBlocked, ep.Protocol)
}

// guardSSH makes an ssh credential refuse a connection whose remote address the guard refuses, before the host
// key is accepted and so before any credential is sent. An ssh URL without an ssh-key credential is refused:
// go-git would fall back to an ssh agent, whose connection nothing here checks.
func guardSSH(ctx context.Context, raw string, auth transport.AuthMethod) (transport.AuthMethod, error) {
	if ep, err := transport.NewEndpoint(raw); err != nil || ep.Protocol != "ssh" {
		return auth, nil
	}
	keys, ok := auth.(*gitssh.PublicKeys)
	if !ok {
		return nil, fmt.Errorf("repository %s: ssh needs a credential Secret of type %s", pipeline.RedactURL(raw), CredSSHKey)
	}
	g := fetchGuard(ctx)
	inner := keys.HostKeyCallback
	guarded := *keys
	guarded.HostKeyCallback = func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		if err := g.Control("tcp", strings.TrimSpace(remote.String()), nil); err != nil {
			return fmt.Errorf("ssh to %s: %w", hostname, err)
		}
		if inner == nil {
			return fmt.Errorf("ssh to %s: no known hosts to verify the server", hostname)
		}
		return inner(hostname, remote, key)
	}
	return &guarded, nil
}
