package registry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/quartet-dev/quartet-operator/internal/mcp"
)

// DefaultMCPPath is the agent's MCP endpoint path when spec.mcp.path is empty.
const DefaultMCPPath = "/mcp"

// Agent is what the AgentDeployment reconciler knows about an agent to register.
type Agent struct {
	Namespace, Name string
	Port            int32
	Path            string   // spec.mcp.path; DefaultMCPPath when empty
	Tools           []string // spec.mcp.tools, merged with the discovered ones
	Version         string   // optional, e.g. status.stableVersion
}

// Key returns the agent's registry key.
func (a *Agent) Key() Key { return Key{Namespace: a.Namespace, Name: a.Name} }

// HostMap rewrites in-cluster service hosts to other addresses, for tests and `make dev` where the agents'
// MCP servers run on loopback: "planner.team-a.svc:8080" → "127.0.0.1:41234". The key "*" maps every other
// service host to one host, keeping the port ("*" → "127.0.0.1": planner.team-a.svc:41234 → 127.0.0.1:41234).
type HostMap map[string]string

// AnyHost is the HostMap key that matches every service host not listed on its own.
const AnyHost = "*"

// ParseHostMap parses the flag form "host:port=addr:port,...,*=host".
func ParseHostMap(s string) (HostMap, error) {
	m := HostMap{}
	for _, pair := range strings.Split(s, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		from, to, ok := strings.Cut(pair, "=")
		if !ok || from == "" || to == "" || strings.ContainsAny(to, "/?#@ ") {
			return nil, fmt.Errorf("host map entry %q: want host:port=address:port or *=host", pair)
		}
		addr := to
		if from == AnyHost {
			if _, _, err := net.SplitHostPort(to); err == nil {
				return nil, fmt.Errorf("host map entry %q: * maps to a host without a port (the agent's port is kept)", pair)
			}
			addr = net.JoinHostPort(to, "1")
		}
		if !validAddress(addr) {
			return nil, fmt.Errorf("host map entry %q: want host:port=address:port or *=host", pair)
		}
		m[from] = to
	}
	return m, nil
}

// validAddress reports whether host:port is usable as the host of an http URL as it is.
func validAddress(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return false
	}
	u, err := url.Parse("http://" + addr + "/")
	return err == nil && u.Host == addr && u.Hostname() == host && u.Port() == port
}

// Endpoint returns the agent's MCP URL: http://<name>.<ns>.svc:<port><path>, with the host mapped if listed.
func (h HostMap) Endpoint(a *Agent) string {
	path := a.Path
	if path == "" {
		path = DefaultMCPPath
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	port := strconv.Itoa(int(a.Port))
	host := a.Name + "." + a.Namespace + ".svc:" + port
	if to, ok := h[host]; ok {
		host = to
	} else if to, ok := h[AnyHost]; ok {
		host = net.JoinHostPort(to, port)
	}
	return "http://" + host + path
}

// Registrar is what the reconciler calls: discovery through a real MCP handshake, heartbeats, deregistration.
type Registrar struct {
	Registry *Registry
	Client   *mcp.Client
	Hosts    HostMap
}

// ErrHandshake wraps a failed discovery (the reconciler's MCPHandshakeFailed condition).
var ErrHandshake = errors.New("MCP handshake failed")

// Register discovers the agent's tools and registers it (a write only when something changed). Called when
// the agent becomes Running with mcp.expose, and again after a canary promotion (the tools may have changed).
func (r *Registrar) Register(ctx context.Context, a *Agent) (Entry, error) {
	endpoint := r.Hosts.Endpoint(a)
	res, err := r.Client.Discover(ctx, endpoint)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %s: %w", ErrHandshake, endpoint, err)
	}
	e := Entry{Namespace: a.Namespace, Name: a.Name, Endpoint: endpoint, Version: a.Version,
		Tools: mcp.MergeTools(res.Tools, a.Tools)}
	if err := e.Validate(); err != nil {
		return Entry{}, fmt.Errorf("%w: %s: %w", ErrHandshake, endpoint, err)
	}
	if _, err := r.Registry.Register(ctx, e); err != nil {
		return Entry{}, err
	}
	stored, _ := r.Registry.Get(e.Key())
	return stored, nil
}

// Heartbeat probes the agent without leaving a session behind and records the outcome. An agent that
// answers but is missing from the registry (cold start, swept) is registered again. Deregistered means the
// strikes ran out: the reconciler sets MCPHandshakeFailed and status.registered=false.
func (r *Registrar) Heartbeat(ctx context.Context, a *Agent) (HeartbeatResult, error) {
	probeErr := r.Client.Probe(ctx, r.Hosts.Endpoint(a))
	res, strikes, err := r.Registry.Heartbeat(ctx, a.Key(), probeErr == nil)
	if err != nil {
		return res, err
	}
	switch res {
	case Missing:
		if _, err := r.Register(ctx, a); err != nil {
			return res, err
		}
	case Strike, Deregistered:
		return res, fmt.Errorf("%w: heartbeat %d/%d: %w", ErrHandshake, strikes, MaxStrikes, probeErr)
	}
	return res, nil
}

// Deregister removes the agent; the reconciler calls it before removing the finalizer.
func (r *Registrar) Deregister(ctx context.Context, a *Agent) error {
	r.Client.Forget(r.Hosts.Endpoint(a))
	_, err := r.Registry.Deregister(ctx, a.Key())
	return err
}
