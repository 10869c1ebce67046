// Package mcptest runs real MCP servers (the official Go SDK) on loopback for tests that need an agent's MCP
// endpoint: tools that can change, a paginated tools/list, per-method counts, the SDK's own session count,
// and a kill switch that makes the agent stop answering.
package mcptest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options shape the server.
type Options struct {
	// Stateless serves without sessions (what the sessionless protocol revision needs); false is a stateful
	// server that the client reaches through the initialize handshake.
	Stateless bool
	// PageSize paginates tools/list; 0 is the SDK's default.
	PageSize int
	// Versions restricts the protocol versions the server accepts; nil is every version the SDK knows.
	Versions []string
}

// Server is one agent's MCP endpoint at URL()+"/mcp" (any path is served).
type Server struct {
	sdk *sdk.Server
	web *httptest.Server

	mu      sync.Mutex
	tools   []string
	methods map[string]int
}

// Start serves an MCP server with the given tools until the test ends.
func Start(t testing.TB, o Options, tools ...string) *Server {
	t.Helper()
	s := &Server{methods: map[string]int{},
		sdk: sdk.NewServer(&sdk.Implementation{Name: "test-agent", Version: "1.0.0"},
			&sdk.ServerOptions{PageSize: o.PageSize, SupportedProtocolVersions: o.Versions})}
	s.sdk.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			s.mu.Lock()
			s.methods[method]++
			s.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	s.SetTools(tools...)
	// It stands in for an agent's pod: requests carry the Service's in-cluster Host header (the dial map sends
	// the connection to loopback), which the SDK's DNS-rebinding guard of loopback servers would refuse.
	s.web = httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk },
		&sdk.StreamableHTTPOptions{Stateless: o.Stateless, DisableLocalhostProtection: true}))
	t.Cleanup(s.Kill)
	return s
}

// SetTools replaces the server's tools.
func (s *Server) SetTools(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sdk.RemoveTools(s.tools...)
	s.tools = append([]string(nil), names...)
	for _, n := range names {
		s.sdk.AddTool(&sdk.Tool{Name: n, Description: "test tool " + n, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
}

// Count returns how many requests of method (e.g. "initialize", "ping", "tools/list") the server received.
func (s *Server) Count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[method]
}

// Sessions is the SDK server's own count of open sessions: a client that leaks sessions makes it grow.
func (s *Server) Sessions() int {
	n := 0
	for range s.sdk.Sessions() {
		n++
	}
	return n
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234.
func (s *Server) URL() string { return s.web.URL }

// Addr is the server's host:port.
func (s *Server) Addr() string { return strings.TrimPrefix(s.web.URL, "http://") }

// Port is the server's TCP port (to use as an AgentDeployment's spec.port behind a "*=127.0.0.1" host map).
func (s *Server) Port() int32 { return int32(s.web.Listener.Addr().(*net.TCPAddr).Port) }

// Kill stops the server at once, dropping open connections: the agent stops answering. Idempotent.
func (s *Server) Kill() {
	s.web.CloseClientConnections()
	s.web.Close()
}
