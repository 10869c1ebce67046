package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
)

// agentServer is a real MCP server from the official Go SDK on loopback, with a handler in front that counts
// sessions: every Mcp-Session-Id handed out, and which of them the client DELETEd.
type agentServer struct {
	*httptest.Server
	sdk *sdk.Server

	mu      sync.Mutex
	ids     map[string]bool // session id -> DELETE received
	methods []string        // Mcp-Method header or "legacy" per POST
	accepts []string
}

type serverOpts struct {
	tools     int
	pageSize  int
	versions  []string // SupportedProtocolVersions; nil = all the SDK knows
	stateless bool     // needed for the sessionless revision
	json      bool     // application/json replies instead of SSE
	// preModern rejects requests announcing the modern revision with a plain-text 400, the way servers
	// released before that revision answer an unknown Mcp-Protocol-Version.
	preModern bool
	// middleware wraps the SDK's method handling (errors, delays).
	middleware sdk.Middleware
}

func newAgentServer(t *testing.T, o serverOpts) *agentServer {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "test-agent", Version: "1.2.3"},
		&sdk.ServerOptions{PageSize: o.pageSize, SupportedProtocolVersions: o.versions})
	for i := range o.tools {
		s.AddTool(&sdk.Tool{
			Name:        fmt.Sprintf("tool-%02d", i),
			Description: fmt.Sprintf("test tool %d", i),
			InputSchema: map[string]any{"type": "object"},
		}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	}
	if o.middleware != nil {
		s.AddReceivingMiddleware(o.middleware)
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: o.stateless, JSONResponse: o.json})
	a := &agentServer{sdk: s, ids: map[string]bool{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		if r.Method == http.MethodPost {
			m := r.Header.Get("Mcp-Method")
			if m == "" {
				m = "legacy"
			}
			a.methods = append(a.methods, m)
			a.accepts = append(a.accepts, r.Header.Get("Accept"))
		}
		a.mu.Unlock()
		if o.preModern && r.Header.Get("Mcp-Protocol-Version") == mcp.VersionModern {
			http.Error(w, "Bad Request: Unsupported protocol version", http.StatusBadRequest)
			return
		}
		if r.Method == http.MethodDelete {
			a.mu.Lock()
			a.ids[r.Header.Get("Mcp-Session-Id")] = true
			a.mu.Unlock()
		}
		h.ServeHTTP(w, r)
		if id := w.Header().Get("Mcp-Session-Id"); r.Header.Get("Mcp-Session-Id") == "" && id != "" {
			a.mu.Lock()
			a.ids[id] = a.ids[id] || false
			a.mu.Unlock()
		}
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *agentServer) endpoint() string { return a.URL + "/mcp" }

// liveSessions is the SDK server's own count of open sessions.
func (a *agentServer) liveSessions() int {
	n := 0
	for range a.sdk.Sessions() {
		n++
	}
	return n
}

// counts returns the sessions handed out, how many of those the client DELETEd, and what was POSTed.
func (a *agentServer) counts() (created, deleted int, methods, accepts []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, del := range a.ids {
		created++
		if del {
			deleted++
		}
	}
	return created, deleted, append([]string(nil), a.methods...), append([]string(nil), a.accepts...)
}

func toolNames(tools []mcp.Tool) []string {
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.Name)
	}
	return out
}

func expectedNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("tool-%02d", i)
	}
	return out
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestDiscoverAcrossRevisions(t *testing.T) {
	cases := []struct {
		name        string
		opts        serverOpts
		wantVersion string
		wantModern  bool
	}{
		{"modern stateless, paginated", serverOpts{tools: 7, pageSize: 3, stateless: true}, mcp.VersionModern, true},
		{"stateful SDK server: discover lists legacy versions, SSE replies", serverOpts{tools: 7, pageSize: 2},
			mcp.Version20251125, false},
		{"legacy-only 2025-06-18: -32022 body names it", serverOpts{tools: 5, pageSize: 2, json: true,
			versions: []string{"2025-06-18"}}, mcp.Version20250618, false},
		{"pre-modern server: plain 400, fallback to initialize", serverOpts{tools: 4, pageSize: 3, preModern: true,
			versions: []string{"2025-11-25", "2025-06-18"}}, mcp.Version20251125, false},
		{"single page", serverOpts{tools: 3, stateless: true}, mcp.VersionModern, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := newAgentServer(t, tc.opts)
			c := &mcp.Client{}
			res, err := c.Discover(ctx(t), srv.endpoint())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.ProtocolVersion).To(Equal(tc.wantVersion))
			g.Expect(res.Modern).To(Equal(tc.wantModern))
			g.Expect(toolNames(res.Tools)).To(Equal(expectedNames(tc.opts.tools)))
			g.Expect(res.Tools[0].Description).To(Equal("test tool 0"))
			if !tc.wantModern {
				g.Expect(res.ServerName).To(Equal("test-agent"))
			}
			created, deleted, methods, accepts := srv.counts()
			g.Expect(created).To(Equal(deleted), "every session opened was DELETEd")
			g.Eventually(srv.liveSessions).Should(BeZero())
			g.Expect(methods[0]).To(Equal("server/discover"), "the modern revision is tried first")
			for _, a := range accepts {
				g.Expect(a).To(Equal("application/json, text/event-stream"))
			}
			if tc.wantModern {
				g.Expect(created).To(BeZero())
				g.Expect(methods[1:]).To(HaveEach("tools/list"))
			}
		})
	}
}

func TestDiscoverFailures(t *testing.T) {
	failing := func(method string) sdk.Middleware {
		return func(next sdk.MethodHandler) sdk.MethodHandler {
			return func(ctx context.Context, m string, req sdk.Request) (sdk.Result, error) {
				if m == method {
					return nil, errors.New("agent is broken")
				}
				return next(ctx, m, req)
			}
		}
	}
	// The SDK does not cancel a handler when the client gives up, and closing the session waits for it: the
	// hanging handler is released once the client has returned, and the session must then be gone.
	release := make(chan struct{})
	hanging := func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, m string, req sdk.Request) (sdk.Result, error) {
			if m == "tools/list" {
				<-release
				return nil, errors.New("released")
			}
			return next(ctx, m, req)
		}
	}
	cases := []struct {
		name    string
		opts    serverOpts
		client  *mcp.Client
		wantErr func(Gomega, error)
		after   func()
	}{
		{"tools/list answers a JSON-RPC error", serverOpts{tools: 3, middleware: failing("tools/list")}, &mcp.Client{},
			func(g Gomega, err error) { g.Expect(err.Error()).To(ContainSubstring("agent is broken")) }, nil},
		{"initialize answers an error", serverOpts{tools: 3, middleware: failing("initialize")}, &mcp.Client{},
			func(g Gomega, err error) { g.Expect(err.Error()).To(ContainSubstring("agent is broken")) }, nil},
		{"server only speaks 2024-11-05", serverOpts{tools: 3, versions: []string{"2024-11-05"}}, &mcp.Client{},
			func(g Gomega, err error) { g.Expect(err).To(MatchError(mcp.ErrUnsupportedVersion)) }, nil},
		{"more pages than allowed", serverOpts{tools: 5, pageSize: 1, stateless: true}, &mcp.Client{MaxPages: 3},
			func(g Gomega, err error) { g.Expect(err).To(MatchError(mcp.ErrTooManyPages)) }, nil},
		{"reply larger than the cap", serverOpts{tools: 40}, &mcp.Client{MaxResponseBytes: 1024},
			func(g Gomega, err error) { g.Expect(err).To(MatchError(mcp.ErrResponseTooLarge)) }, nil},
		{"tools/list never answers", serverOpts{tools: 3, middleware: hanging},
			&mcp.Client{CallTimeout: 300 * time.Millisecond},
			func(g Gomega, err error) { g.Expect(err).To(MatchError(context.DeadlineExceeded)) },
			func() { close(release) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := newAgentServer(t, tc.opts)
			// Release a hung handler even when an assertion below fails first: the server's Close waits for it.
			var once sync.Once
			after := func() {
				if tc.after != nil {
					once.Do(tc.after)
				}
			}
			t.Cleanup(after)
			start := time.Now()
			_, err := tc.client.Discover(ctx(t), srv.endpoint())
			g.Expect(err).To(HaveOccurred())
			tc.wantErr(g, err)
			g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
			after()
			g.Eventually(func(g Gomega) {
				created, deleted, _, _ := srv.counts()
				g.Expect(created).To(Equal(deleted), "the session is DELETEd on failure too")
				g.Expect(srv.liveSessions()).To(BeZero())
			}).Should(Succeed())
		})
	}
}

func TestDiscoverHTTPErrors(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		// The go-sdk client falls back to initialize after any failed server/discover (the hand-written client
		// stopped at a 5xx); the answer is the same error one request later.
		{"5xx everywhere", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, `"initialize": Internal Server Error`},
		{"4xx everywhere: fallback tried, then fails", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "nope", http.StatusNotFound)
		}, `"initialize": Not Found`},
		{"not MCP at all", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>"))
		}, `unsupported content type "text/html"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			_, err := (&mcp.Client{}).Discover(ctx(t), srv.URL+"/mcp")
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
		})
	}
	g := NewWithT(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	g.Expect((&mcp.Client{}).Probe(ctx(t), srv.URL+"/mcp")).To(MatchError(ContainSubstring("connection refused")))
}

// The upstream registry left a server session behind on every heartbeat. Twenty probes against each kind of
// server must leave none: the server's own session list is empty and every Mcp-Session-Id was DELETEd.
func TestProbeLeaksNoSessions(t *testing.T) {
	for name, o := range map[string]serverOpts{
		"stateful":    {tools: 3},
		"legacy-only": {tools: 3, versions: []string{"2025-06-18"}},
		"pre-modern":  {tools: 3, preModern: true, versions: []string{"2025-11-25"}},
		"modern":      {tools: 3, stateless: true},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			srv := newAgentServer(t, o)
			c := &mcp.Client{}
			for range 20 {
				g.Expect(c.Probe(ctx(t), srv.endpoint())).To(Succeed())
			}
			created, deleted, methods, _ := srv.counts()
			g.Expect(created).To(Equal(deleted))
			g.Eventually(srv.liveSessions).Should(BeZero())
			if o.stateless {
				g.Expect(created).To(BeZero())
				g.Expect(methods).To(HaveLen(20), "one server/discover per heartbeat")
			} else {
				g.Expect(created).To(Equal(20), "one short session per heartbeat")
				// The first probe learns the server is legacy; later ones go straight to initialize.
				g.Expect(strings.Count(strings.Join(methods, ","), "server/discover")).To(Equal(1))
			}
		})
	}
}

func TestMergeTools(t *testing.T) {
	cases := []struct {
		name       string
		discovered []mcp.Tool
		declared   []string
		want       []string
	}{
		{"both empty", nil, nil, []string{}},
		{"union sorted", []mcp.Tool{{Name: "b"}, {Name: "a"}}, []string{"c"}, []string{"a", "b", "c"}},
		{"duplicates across and within", []mcp.Tool{{Name: "x"}, {Name: "x"}}, []string{"x", "y", "y"},
			[]string{"x", "y"}},
		{"blank names dropped, spaces trimmed", []mcp.Tool{{Name: " "}, {Name: " a "}}, []string{"", "a"},
			[]string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(mcp.MergeTools(tc.discovered, tc.declared)).To(Equal(tc.want))
		})
	}
}

// A server may keep the SSE stream of a POST open after the response; the client must not wait for it to end.
func TestSSEStreamLeftOpen(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     int64  `json:"id"`
			Method string `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		result := `{"supportedVersions":["2026-07-28"],"capabilities":{}}`
		if req.Method == "tools/list" {
			result = `{"tools":[{"name":"kept-open"}]}`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":%s}\n\n", req.ID, result)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	start := time.Now()
	res, err := (&mcp.Client{CallTimeout: 3 * time.Second}).Discover(ctx(t), srv.URL+"/mcp")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(toolNames(res.Tools)).To(Equal([]string{"kept-open"}))
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
}

// Every published Streamable HTTP revision from 2025-03-26 on is accepted: a server pinned to one revision
// (the SDK's ServerOptions.SupportedProtocolVersions) is negotiated down to it, and the revision is reported.
func TestDiscoverNegotiatesDownToEachRevision(t *testing.T) {
	for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		for _, jsonReplies := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s json=%v", v, jsonReplies), func(t *testing.T) {
				g := NewWithT(t)
				srv := newAgentServer(t, serverOpts{tools: 3, versions: []string{v}, json: jsonReplies})
				c := &mcp.Client{}
				res, err := c.Discover(ctx(t), srv.endpoint())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.ProtocolVersion).To(Equal(v))
				g.Expect(toolNames(res.Tools)).To(Equal(expectedNames(3)))
				g.Expect(c.Probe(ctx(t), srv.endpoint())).To(Succeed())
				created, deleted, _, _ := srv.counts()
				g.Expect(created).To(Equal(deleted))
			})
		}
	}
	// Older and newer together: the newest both sides name wins.
	g := NewWithT(t)
	srv := newAgentServer(t, serverOpts{tools: 1, versions: []string{"2025-03-26", "2025-06-18"}})
	res, err := (&mcp.Client{}).Discover(ctx(t), srv.endpoint())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ProtocolVersion).To(Equal("2025-06-18"))
}

// Tools keep their title, description and input schema as the server listed them.
func TestDiscoverKeepsToolMetadata(t *testing.T) {
	g := NewWithT(t)
	srv := newAgentServer(t, serverOpts{stateless: true})
	srv.sdk.AddTool(&sdk.Tool{Name: "search", Title: "Search the web", Description: "Finds pages.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	res, err := (&mcp.Client{}).Discover(ctx(t), srv.endpoint())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Tools).To(HaveLen(1))
	g.Expect(res.Tools[0].Title).To(Equal("Search the web"))
	g.Expect(res.Tools[0].Description).To(Equal("Finds pages."))
	g.Expect(string(res.Tools[0].InputSchema)).To(MatchJSON(`{"type":"object","properties":{"q":{"type":"string"}}}`))
}

// roundRobin is what a ClusterIP Service does to an agent with several pods: each new TCP connection goes to
// the next backend. A session opened on one pod is unknown to the others (404).
func roundRobin(t *testing.T, backends ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var next atomic.Int64
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			backend := backends[int(next.Add(1)-1)%len(backends)]
			go func() {
				defer func() { _ = in.Close() }()
				out, err := net.Dial("tcp", backend)
				if err != nil {
					return
				}
				defer func() { _ = out.Close() }()
				go func() { _, _ = io.Copy(out, in); _ = out.(*net.TCPConn).CloseWrite() }()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return ln.Addr().String()
}

// Three go-sdk servers behind one Service, two of them stateful: every heartbeat and discovery must succeed,
// whichever pod each connection lands on, and no session may be left on any of them.
func TestMultiReplicaAgentNeverFlaps(t *testing.T) {
	g := NewWithT(t)
	a := newAgentServer(t, serverOpts{tools: 2})
	b := newAgentServer(t, serverOpts{tools: 2})
	c := newAgentServer(t, serverOpts{tools: 2, stateless: true})
	svc := roundRobin(t, strings.TrimPrefix(a.URL, "http://"), strings.TrimPrefix(b.URL, "http://"),
		strings.TrimPrefix(c.URL, "http://"))
	client := &mcp.Client{}
	endpoint := "http://" + svc + "/mcp"
	for i := range 30 {
		g.Expect(client.Probe(ctx(t), endpoint)).To(Succeed(), "heartbeat %d", i)
	}
	for i := range 10 {
		res, err := client.Discover(ctx(t), endpoint)
		g.Expect(err).NotTo(HaveOccurred(), "discovery %d", i)
		g.Expect(toolNames(res.Tools)).To(Equal(expectedNames(2)))
	}
	for _, s := range []*agentServer{a, b} {
		created, deleted, _, _ := s.counts()
		g.Expect(created).To(Equal(deleted))
		g.Eventually(s.liveSessions).Should(BeZero())
	}
}
