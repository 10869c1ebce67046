// Package mcp is the operator's client for an agent's Model Context Protocol endpoint over Streamable HTTP, built
// on the official go-sdk client (github.com/modelcontextprotocol/go-sdk), which negotiates every revision the
// registry accepts: the sessionless 2026-07-28 (server/discover) and, through initialize, 2025-11-25, 2025-06-18
// and 2025-03-26. What this package adds is what the registry needs around it: a deadline per exchange, a size
// cap per reply, one connection per conversation (so a Service balancing connections cannot split a session), a
// session that is always ended, and a bounded tool list.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol revisions the registry accepts. Modern is the sessionless revision; the legacy ones use initialize.
const (
	VersionModern   = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
)

// acceptedVersions are the revisions a conversation may end up on. 2024-11-05 is not among them: its transport
// is HTTP+SSE with a separate POST endpoint, which the registry does not speak.
var acceptedVersions = []string{VersionModern, Version20251125, Version20250618, Version20250326}

// Defaults of the Client's limits.
const (
	DefaultCallTimeout      = 5 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxPages         = 20
	// DefaultDrainTimeout bounds the wait for a server to end an SSE reply stream after the reply arrived.
	DefaultDrainTimeout = 250 * time.Millisecond
)

// Client talks to agents' MCP endpoints. The zero value is usable; it is safe for concurrent use.
type Client struct {
	// HTTP is the client whose transport every conversation clones (the dial seam of local runs); its Timeout is
	// not relied upon: every exchange gets CallTimeout through its context.
	HTTP *http.Client
	// CallTimeout bounds each exchange: the handshake, each tools/list page, each ping.
	CallTimeout time.Duration
	// MaxResponseBytes caps each reply: a JSON body, or one event of an SSE stream.
	MaxResponseBytes int64
	// MaxPages bounds the tools/list pages followed, so a server returning cursors forever cannot hold a worker.
	MaxPages int
	// DrainTimeout bounds reading the rest of an SSE reply stream after the reply (DefaultDrainTimeout).
	DrainTimeout time.Duration
	// Name and Version identify the operator in clientInfo.
	Name, Version string

	// legacy remembers endpoints that negotiated an initialize-era revision, so heartbeats to them skip the
	// server/discover attempt. Discover always tries the modern revision first and refreshes this.
	legacy sync.Map // endpoint -> version string
}

// Tool is a tool as listed by tools/list; only the fields the registry publishes are kept.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// Result is what a discovery found.
type Result struct {
	// ProtocolVersion is the revision the conversation used.
	ProtocolVersion string
	// Modern is true when the sessionless revision was used (no initialize, no session).
	Modern bool
	// ServerName and ServerVersion are from serverInfo, when the server sent it.
	ServerName, ServerVersion string
	// ToolsListChanged is the server's capabilities.tools.listChanged: it sends
	// notifications/tools/list_changed, so ListenToolChanges can replace polling.
	ToolsListChanged bool
	Tools            []Tool
}

// ErrUnsupportedVersion is returned when the server and the client share no protocol revision.
var ErrUnsupportedVersion = errors.New("mcp: no protocol version in common with the server")

// ErrTooManyPages is returned when tools/list keeps returning cursors past MaxPages.
var ErrTooManyPages = errors.New("mcp: tools/list exceeded the page limit")

// Discover finds the server's tools: the handshake (server/discover, falling back to initialize when the server
// does not speak the sessionless revision) and tools/list. A session is always ended with DELETE, also on error.
func (c *Client) Discover(ctx context.Context, endpoint string) (*Result, error) {
	c.legacy.Delete(endpoint)
	var out *Result
	err := c.conversation(ctx, endpoint, func(v *convo, cs *sdk.ClientSession, res *Result) error {
		tools, err := v.listTools(ctx, cs)
		res.Tools, out = tools, res
		return err
	})
	return out, err
}

// Probe is the heartbeat: the cheapest exchange that shows the server answers MCP. On the modern revision it is
// one server/discover; on a legacy server it is initialize, notifications/initialized and ping inside a session
// that is then deleted, so no probe leaves a session behind on the server.
func (c *Client) Probe(ctx context.Context, endpoint string) error {
	return c.conversation(ctx, endpoint, func(v *convo, cs *sdk.ClientSession, res *Result) error {
		if res.Modern {
			return nil
		}
		return v.exchange(ctx, "ping", func(ctx context.Context) error { return cs.Ping(ctx, nil) })
	})
}

// Forget drops what the client remembers about an endpoint (called when the agent is deregistered).
func (c *Client) Forget(endpoint string) { c.legacy.Delete(endpoint) }

// conversation connects over a transport of its own, allowed one connection, runs fn and closes the session
// (DELETE of a legacy session). Behind a ClusterIP Service, balanced per connection, every request of the
// conversation then reaches the pod that knows the session.
func (c *Client) conversation(ctx context.Context, endpoint string, fn func(*convo, *sdk.ClientSession, *Result) error) (err error) {
	hc, caps, done := c.oneConnection()
	defer done()
	v := &convo{c: c, caps: caps}
	defer v.end()
	cs, res, err := v.connect(ctx, endpoint, hc, nil, true)
	if err != nil {
		return caps.explain(err)
	}
	defer func() {
		if errors.Is(err, context.DeadlineExceeded) {
			caps.abort()
		}
		if cerr := c.close(cs, caps); cerr != nil && err == nil {
			err = fmt.Errorf("mcp: ending the session: %w", cerr)
		}
	}()
	return caps.explain(fn(v, cs, res))
}

// close ends the session (DELETE of a legacy one) within one CallTimeout: the SDK allows the DELETE five
// seconds, and a server whose handler still hangs may hold it that long. Past the deadline the conversation's
// connections are closed, which ends the DELETE.
func (c *Client) close(cs *sdk.ClientSession, caps *limits) error {
	closed := make(chan error, 1)
	go func() { closed <- cs.Close() }()
	timer := time.NewTimer(c.callTimeout())
	defer timer.Stop()
	select {
	case err := <-closed:
		return err
	case <-timer.C:
		caps.abort()
		return <-closed
	}
}

// convo holds the deadlines of one conversation's exchanges until it ends. An exchange's context is also its HTTP
// request's: cancelling it as soon as the SDK returned the reply would cut the rest of the reply stream, which
// the SDK still reads, and with it the one connection — the next request would open another one, possibly to
// another pod behind the Service.
type convo struct {
	c       *Client
	caps    *limits
	mu      sync.Mutex
	cancels []context.CancelFunc
}

// end releases every exchange's deadline.
func (v *convo) end() {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, cancel := range v.cancels {
		cancel()
	}
	v.cancels = nil
}

// connect runs the handshake within one CallTimeout and checks the negotiated revision.
func (v *convo) connect(ctx context.Context, endpoint string, hc *http.Client, opts *sdk.ClientOptions,
	noStream bool) (*sdk.ClientSession, *Result, error) {
	c := v.c
	if opts == nil {
		opts = &sdk.ClientOptions{}
	}
	// The registry offers no client features: no roots, sampling or elicitation.
	opts.Capabilities = &sdk.ClientCapabilities{}
	client := sdk.NewClient(c.info(), opts)
	transport := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc,
		// The caller reconnects (a listener opens a new stream); the SDK's own retries would outlive its deadline.
		MaxRetries: -1,
		// Discover and Probe want no server-initiated messages, and the GET stream would hold the one connection.
		DisableStandaloneSSE: noStream,
		// The transport's capReader enforces MaxResponseBytes per event with an error of its own.
		MaxEventSize: -1}
	var sessionOpts *sdk.ClientSessionOptions
	if known, ok := c.legacy.Load(endpoint); ok {
		// Known to be legacy: straight to initialize, no server/discover first.
		sessionOpts = &sdk.ClientSessionOptions{ProtocolVersion: known.(string)}
	}
	var cs *sdk.ClientSession
	err := v.exchange(ctx, "handshake", func(ctx context.Context) error {
		var err error
		cs, err = client.Connect(ctx, transport, sessionOpts)
		return err
	})
	if err != nil {
		if strings.Contains(err.Error(), "unsupported protocol version") {
			return nil, nil, fmt.Errorf("%w: %w", ErrUnsupportedVersion, err)
		}
		return nil, nil, err
	}
	ir := cs.InitializeResult()
	if ir == nil || !slices.Contains(acceptedVersions, ir.ProtocolVersion) {
		_ = cs.Close()
		got := ""
		if ir != nil {
			got = ir.ProtocolVersion
		}
		return nil, nil, fmt.Errorf("%w: server answered %q", ErrUnsupportedVersion, got)
	}
	res := &Result{ProtocolVersion: ir.ProtocolVersion, Modern: ir.ProtocolVersion == VersionModern,
		ToolsListChanged: ir.Capabilities != nil && ir.Capabilities.Tools != nil && ir.Capabilities.Tools.ListChanged}
	if ir.ServerInfo != nil {
		res.ServerName, res.ServerVersion = ir.ServerInfo.Name, ir.ServerInfo.Version
	}
	if res.Modern {
		c.legacy.Delete(endpoint)
	} else {
		c.legacy.Store(endpoint, ir.ProtocolVersion)
	}
	return cs, res, nil
}

// exchange runs one exchange under CallTimeout; a timeout is reported as such whatever the SDK made of it.
func (v *convo) exchange(ctx context.Context, what string, fn func(context.Context) error) error {
	callCtx, cancel := context.WithTimeout(ctx, v.c.callTimeout())
	v.mu.Lock()
	v.cancels = append(v.cancels, cancel)
	v.mu.Unlock()
	// A deadline passing while the SDK still waits closes the connections: some of its waits (a request of the
	// handshake to a server that accepted the connection and never answers) do not end with the context.
	refused := make(chan struct{})
	stop := context.AfterFunc(callCtx, func() { v.caps.refuse(); close(refused) })
	err := fn(callCtx)
	if !stop() {
		<-refused
		v.caps.allow()
	}
	if err != nil && callCtx.Err() != nil && !errors.Is(err, callCtx.Err()) {
		return fmt.Errorf("mcp: %s: %w (%w)", what, callCtx.Err(), err)
	}
	if err != nil {
		return fmt.Errorf("mcp: %s: %w", what, err)
	}
	return nil
}

// listTools follows nextCursor up to MaxPages pages, each page its own exchange.
func (v *convo) listTools(ctx context.Context, cs *sdk.ClientSession) ([]Tool, error) {
	var tools []Tool
	cursor := ""
	for range v.c.maxPages() {
		var page *sdk.ListToolsResult
		err := v.exchange(ctx, "tools/list", func(ctx context.Context) error {
			var err error
			page, err = cs.ListTools(ctx, &sdk.ListToolsParams{Cursor: cursor})
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, t := range page.Tools {
			tool := Tool{Name: t.Name, Title: t.Title, Description: t.Description}
			if t.InputSchema != nil {
				if tool.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
					return nil, fmt.Errorf("mcp: tool %q: encoding its input schema: %w", t.Name, err)
				}
			}
			tools = append(tools, tool)
		}
		if page.NextCursor == "" {
			return tools, nil
		}
		cursor = page.NextCursor
	}
	return nil, ErrTooManyPages
}

func (c *Client) info() *sdk.Implementation {
	name, version := c.Name, c.Version
	if name == "" {
		name = "quartet-operator"
	}
	if version == "" {
		version = "dev"
	}
	return &sdk.Implementation{Name: name, Version: version}
}

func (c *Client) callTimeout() time.Duration {
	if c.CallTimeout > 0 {
		return c.CallTimeout
	}
	return DefaultCallTimeout
}

func (c *Client) maxResponseBytes() int64 {
	if c.MaxResponseBytes > 0 {
		return c.MaxResponseBytes
	}
	return DefaultMaxResponseBytes
}

func (c *Client) drainTimeout() time.Duration {
	if c.DrainTimeout > 0 {
		return c.DrainTimeout
	}
	return DefaultDrainTimeout
}

func (c *Client) maxPages() int {
	if c.MaxPages > 0 {
		return c.MaxPages
	}
	return DefaultMaxPages
}
