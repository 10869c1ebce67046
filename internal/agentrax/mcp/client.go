package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the Client's limits.
const (
	DefaultCallTimeout      = 5 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxPages         = 20
	// DefaultDrainTimeout bounds the wait for a server to end an SSE reply stream after our response arrived.
	DefaultDrainTimeout = 250 * time.Millisecond
)

// Client talks to agents' MCP endpoints. The zero value is usable; it is safe for concurrent use.
type Client struct {
	// HTTP is the client used for every request. Its own Timeout is not relied upon: every exchange gets
	// CallTimeout through its context.
	HTTP *http.Client
	// CallTimeout bounds each HTTP exchange (not the whole conversation; the caller's context does that).
	CallTimeout time.Duration
	// MaxResponseBytes caps the body of each reply.
	MaxResponseBytes int64
	// MaxPages bounds the tools/list pages followed, so a server returning cursors forever cannot hold a worker.
	MaxPages int
	// DrainTimeout bounds reading the rest of an SSE reply after the response (DefaultDrainTimeout).
	DrainTimeout time.Duration
	// Name and Version identify the operator in clientInfo.
	Name, Version string

	nextID atomic.Int64
	// legacy remembers endpoints that did not speak the modern revision, so heartbeats to them skip the
	// server/discover attempt. Discover always tries the modern path first and refreshes this.
	legacy sync.Map // endpoint -> legacy version string
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

// capabilities is the part of the server's capabilities the registry uses.
type capabilities struct {
	Tools *struct {
		ListChanged bool `json:"listChanged"`
	} `json:"tools,omitempty"`
}

func (c *capabilities) toolsListChanged() bool {
	return c != nil && c.Tools != nil && c.Tools.ListChanged
}

type implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

type initializeResult struct {
	ProtocolVersion string          `json:"protocolVersion"`
	ServerInfo      *implementation `json:"serverInfo,omitempty"`
	Capabilities    *capabilities   `json:"capabilities,omitempty"`
}

type discoverResult struct {
	SupportedVersions []string                   `json:"supportedVersions"`
	Capabilities      *capabilities              `json:"capabilities,omitempty"`
	Meta              map[string]json.RawMessage `json:"_meta,omitempty"`
}

type listToolsResult struct {
	Tools      []Tool `json:"tools"`
	NextCursor string `json:"nextCursor,omitempty"`
}

type unsupportedVersionData struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested"`
}

// ErrUnsupportedVersion is returned when the server and the client share no protocol revision.
var ErrUnsupportedVersion = errors.New("mcp: no protocol version in common with the server")

// ErrTooManyPages is returned when tools/list keeps returning cursors past MaxPages.
var ErrTooManyPages = errors.New("mcp: tools/list exceeded the page limit")

// Discover finds the server's tools. It tries the sessionless revision first (server/discover, then
// tools/list carrying _meta) and falls back to the initialize handshake when the server does not speak it.
// A legacy session is always ended with DELETE, also on error.
func (c *Client) Discover(ctx context.Context, endpoint string) (*Result, error) {
	hc, done := c.conversation()
	defer done()
	legacyVersion, res, err := c.tryModern(ctx, hc, endpoint)
	if err != nil {
		return nil, err
	}
	if res != nil {
		c.legacy.Delete(endpoint)
		x := exchange{http: hc, endpoint: endpoint, version: VersionModern, modern: true}
		if res.Tools, err = c.listTools(ctx, x, true); err != nil {
			return nil, err
		}
		return res, nil
	}
	var out *Result
	err = c.withSession(ctx, hc, endpoint, legacyVersion, func(x exchange, r *Result) error {
		tools, err := c.listTools(ctx, x, false)
		r.Tools = tools
		out = r
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Probe is the heartbeat: the cheapest exchange that shows the server answers MCP. On the modern revision it
// is one server/discover; on a legacy server it is initialize, notifications/initialized and ping inside a
// session that is then deleted, so no probe leaves a session behind on the server.
func (c *Client) Probe(ctx context.Context, endpoint string) error {
	hc, done := c.conversation()
	defer done()
	if v, ok := c.legacy.Load(endpoint); ok {
		return c.probeLegacy(ctx, hc, endpoint, v.(string))
	}
	legacyVersion, res, err := c.tryModern(ctx, hc, endpoint)
	if err != nil || res != nil {
		return err
	}
	return c.probeLegacy(ctx, hc, endpoint, legacyVersion)
}

// conversation returns the HTTP client of one Discover or Probe: a copy of the Client's transport allowed
// one connection, so that initialize, the requests in the session and its DELETE all travel over the same TCP
// connection. Behind a ClusterIP Service (balanced per connection) they then reach the same pod, which is the
// only one that knows the session. done closes the connection. A custom RoundTripper is used as it is.
func (c *Client) conversation() (*http.Client, func()) {
	base := c.httpClient()
	var t *http.Transport
	switch rt := base.Transport.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		return base, func() {}
	}
	t.MaxConnsPerHost, t.MaxIdleConnsPerHost, t.DisableKeepAlives = 1, 1, false
	hc := *base
	hc.Transport = t
	return &hc, t.CloseIdleConnections
}

// Forget drops what the client remembers about an endpoint (called when the agent is deregistered).
func (c *Client) Forget(endpoint string) { c.legacy.Delete(endpoint) }

func (c *Client) probeLegacy(ctx context.Context, hc *http.Client, endpoint, version string) error {
	return c.withSession(ctx, hc, endpoint, version, func(x exchange, _ *Result) error {
		_, err := c.call(ctx, x, "ping", struct{}{}, nil)
		return err
	})
}

// tryModern sends server/discover. It returns a Result when the server speaks the modern revision; otherwise
// the legacy version to offer in initialize. Errors are returned only when falling back makes no sense
// (transport failure, 5xx): a 4xx or a JSON-RPC error without a modern body means "not a modern server".
func (c *Client) tryModern(ctx context.Context, hc *http.Client, endpoint string) (string, *Result, error) {
	x := exchange{http: hc, endpoint: endpoint, version: VersionModern, modern: true}
	var dr discoverResult
	hdr, err := c.call(ctx, x, "server/discover", map[string]any{"_meta": c.meta()}, &dr)
	if sid := hdr.Get(headerSessionID); sid != "" {
		// The modern revision has no sessions; a server that opened one anyway gets it ended right away.
		_ = c.deleteSession(exchange{http: hc, endpoint: endpoint, sessionID: sid})
	}
	if err == nil {
		if slices.Contains(dr.SupportedVersions, VersionModern) {
			res := &Result{ProtocolVersion: VersionModern, Modern: true, ToolsListChanged: dr.Capabilities.toolsListChanged()}
			var info implementation
			if raw, ok := dr.Meta[metaServerInfo]; ok && json.Unmarshal(raw, &info) == nil {
				res.ServerName, res.ServerVersion = info.Name, info.Version
			}
			return "", res, nil
		}
		return c.pickLegacy(endpoint, dr.SupportedVersions), nil, nil
	}
	var herr *HTTPError
	var rerr *RPCError
	switch {
	case errors.As(err, &herr) && herr.RPC != nil && herr.RPC.Code == CodeUnsupportedProtocolVersion:
		// A modern error body: the server names what it supports, negotiate from that list.
		var data unsupportedVersionData
		_ = json.Unmarshal(herr.RPC.Data, &data)
		return c.pickLegacy(endpoint, data.Supported), nil, nil
	case errors.As(err, &herr) && herr.Status >= 400 && herr.Status <= 499:
		return c.pickLegacy(endpoint, nil), nil, nil
	case errors.As(err, &rerr):
		// A JSON-RPC error in a 200 reply (method not found, not initialized): a server of an older revision.
		return c.pickLegacy(endpoint, nil), nil, nil
	}
	return "", nil, err
}

// pickLegacy chooses the initialize version: the newest one both sides name, else our newest (the server
// then answers with its own and initialize decides).
func (c *Client) pickLegacy(endpoint string, serverSupports []string) string {
	v := legacyVersions[0]
	for _, ours := range legacyVersions {
		if slices.Contains(serverSupports, ours) {
			v = ours
			break
		}
	}
	c.legacy.Store(endpoint, v)
	return v
}

// withSession runs initialize → notifications/initialized → fn, and always DELETEs the session afterwards.
func (c *Client) withSession(ctx context.Context, hc *http.Client, endpoint, version string, fn func(exchange, *Result) error) (err error) {
	x := exchange{http: hc, endpoint: endpoint}
	var ir initializeResult
	params := map[string]any{
		"protocolVersion": version,
		"capabilities":    map[string]any{},
		"clientInfo":      c.info(),
	}
	hdr, callErr := c.call(ctx, x, "initialize", params, &ir)
	if hdr != nil {
		x.sessionID = hdr.Get(headerSessionID)
	}
	if x.sessionID != "" {
		defer func() {
			if derr := c.deleteSession(x); derr != nil && err == nil {
				err = derr
			}
		}()
	}
	if callErr != nil {
		return callErr
	}
	if !slices.Contains(legacyVersions, ir.ProtocolVersion) {
		return fmt.Errorf("%w: server answered %q", ErrUnsupportedVersion, ir.ProtocolVersion)
	}
	x.version = ir.ProtocolVersion
	c.legacy.Store(endpoint, ir.ProtocolVersion)
	if err := c.notify(ctx, x, "notifications/initialized"); err != nil {
		return err
	}
	res := &Result{ProtocolVersion: ir.ProtocolVersion, ToolsListChanged: ir.Capabilities.toolsListChanged()}
	if ir.ServerInfo != nil {
		res.ServerName, res.ServerVersion = ir.ServerInfo.Name, ir.ServerInfo.Version
	}
	return fn(x, res)
}

// listTools follows nextCursor up to MaxPages pages.
func (c *Client) listTools(ctx context.Context, x exchange, modern bool) ([]Tool, error) {
	var tools []Tool
	cursor := ""
	for range c.maxPages() {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		if modern {
			params["_meta"] = c.meta()
		}
		var page listToolsResult
		if _, err := c.call(ctx, x, "tools/list", params, &page); err != nil {
			return nil, err
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == "" {
			return tools, nil
		}
		cursor = page.NextCursor
	}
	return nil, ErrTooManyPages
}

func (c *Client) meta() map[string]any {
	return map[string]any{
		metaProtocolVersion:    VersionModern,
		metaClientInfo:         c.info(),
		metaClientCapabilities: map[string]any{},
	}
}

func (c *Client) info() implementation {
	name, version := c.Name, c.Version
	if name == "" {
		name = "quartet-operator"
	}
	if version == "" {
		version = "dev"
	}
	return implementation{Name: name, Version: version}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
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
