package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
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

// Endpoint returns the agent's MCP URL: http://<name>.<ns>.svc:<port><path>, its Service's in-cluster address.
// In development and tests the connection is sent elsewhere by the MCP client's dialer (internal/devdial),
// never by changing this URL.
func (a *Agent) Endpoint() string {
	path := a.Path
	if path == "" {
		path = DefaultMCPPath
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	port := strconv.Itoa(int(a.Port))
	return "http://" + a.Name + "." + a.Namespace + ".svc:" + port + path
}

// Prober talks to agents for the registry: discovery through a real MCP handshake, heartbeats, relists and
// deregistration, each recorded in Registry. It is not the reconciler's Registrar (controllers/agentrax): that
// interface is implemented by registration.Adapter, which decides when to probe and calls the Prober. One name
// per thing: Registrar (what the reconciler calls), Adapter (its implementation), Prober (the MCP side).
type Prober struct {
	Registry *Registry
	Client   *mcp.Client
}

// ErrHandshake wraps a failed discovery (the reconciler's MCPHandshakeFailed condition).
var ErrHandshake = errors.New("MCP handshake failed")

// Register discovers the agent's tools and registers it (a write only when something changed). Called when
// the agent becomes Running with mcp.expose, and again after a canary promotion (the tools may have changed).
func (r *Prober) Register(ctx context.Context, a *Agent) (Entry, error) {
	e, err := r.discover(ctx, a)
	if err != nil {
		return Entry{}, err
	}
	if _, err := r.Registry.Register(ctx, e); err != nil {
		return Entry{}, err
	}
	stored, _ := r.Registry.Get(e.Key())
	return stored, nil
}

// Relist discovers the agent's tools again and updates its entry only if it is still registered
// (ErrNotRegistered otherwise): a tool-change announcement never brings back an entry that was removed.
func (r *Prober) Relist(ctx context.Context, a *Agent) error {
	e, err := r.discover(ctx, a)
	if err != nil {
		return err
	}
	return r.Registry.Refresh(ctx, e)
}

// discover runs the MCP handshake and tools/list and builds the agent's managed entry.
func (r *Prober) discover(ctx context.Context, a *Agent) (Entry, error) {
	endpoint := a.Endpoint()
	res, err := r.Client.Discover(ctx, endpoint)
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %s: %w", ErrHandshake, endpoint, err)
	}
	e := Entry{Namespace: a.Namespace, Name: a.Name, Endpoint: endpoint, Version: a.Version,
		Tools: mcp.MergeTools(res.Tools, a.Tools), ProtocolVersion: res.ProtocolVersion,
		ManagedBy: "AgentDeployment " + a.Namespace + "/" + a.Name}
	e.ToolInfo, e.ToolInfoTrimmed = FitToolInfo(res.Tools)
	if err := e.Validate(); err != nil {
		return Entry{}, fmt.Errorf("%w: %s: %w", ErrHandshake, endpoint, err)
	}
	return e, nil
}

// Heartbeat probes the agent without leaving a session behind and records the outcome. An agent that
// answers but is missing from the registry (cold start, swept) is registered again. Deregistered means the
// strikes ran out: the reconciler sets MCPHandshakeFailed and status.registered=false.
func (r *Prober) Heartbeat(ctx context.Context, a *Agent) (HeartbeatResult, error) {
	probeErr := r.Client.Probe(ctx, a.Endpoint())
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
func (r *Prober) Deregister(ctx context.Context, a *Agent) error {
	r.Client.Forget(a.Endpoint())
	_, err := r.Registry.Deregister(ctx, a.Key())
	return err
}
