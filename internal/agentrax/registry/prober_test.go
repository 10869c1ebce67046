package registry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
)

// mcpAgent is a real MCP server (official Go SDK) on loopback, standing in for an agent pod.
type mcpAgent struct {
	srv *sdk.Server
	web *httptest.Server
}

func startAgent(t *testing.T, opts *sdk.ServerOptions, stateless bool, tools ...string) *mcpAgent {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "agent", Version: "1.0.0"}, opts)
	a := &mcpAgent{srv: s}
	a.addTools(tools...)
	// It stands in for an agent's pod: requests carry the Service's in-cluster Host header (the dial map sends
	// the connection to loopback), which the SDK's DNS-rebinding guard of loopback servers would refuse.
	a.web = httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: stateless, DisableLocalhostProtection: true}))
	t.Cleanup(a.web.Close)
	return a
}

func (a *mcpAgent) addTools(names ...string) {
	for _, n := range names {
		a.srv.AddTool(&sdk.Tool{Name: n, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
}

func (a *mcpAgent) addr() string { return strings.TrimPrefix(a.web.URL, "http://") }

func (a *mcpAgent) sessions() int {
	n := 0
	for range a.srv.Sessions() {
		n++
	}
	return n
}

func TestProberLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, _, p := newTestRegistry()
	// A legacy (stateful) agent with a paginated tool list, and a modern (stateless) one.
	legacy := startAgent(t, &sdk.ServerOptions{PageSize: 2}, false, "search", "summarize", "plan", "fetch", "rank")
	modern := startAgent(t, &sdk.ServerOptions{PageSize: 2}, true, "code", "test", "review")
	planner := &Agent{Namespace: "team-a", Name: "planner", Port: 8080, Tools: []string{"declared", "search"}}
	coder := &Agent{Namespace: "team-a", Name: "coder", Port: 9000, Path: "mcp", Version: "2.0.1"}
	dial, client := dialThrough(t, "planner.team-a.svc:8080="+legacy.addr()+",coder.team-a.svc:9000="+modern.addr())
	reg := &Prober{Registry: r, Client: client}

	// Register and discover.
	e, err := reg.Register(ctx, planner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Tools).To(Equal([]string{"declared", "fetch", "plan", "rank", "search", "summarize"}))
	g.Expect(e.Endpoint).To(Equal("http://planner.team-a.svc:8080/mcp"), "the in-cluster URL; only the connection is local")
	e, err = reg.Register(ctx, coder)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Tools).To(Equal([]string{"code", "review", "test"}))
	g.Expect(e.Version).To(Equal("2.0.1"))
	g.Expect(p.count()).To(Equal(2))

	// A canary promotion brings new tools: registering again updates the entry (one write).
	legacy.addTools("translate")
	legacy.srv.RemoveTools("rank")
	e, err = reg.Register(ctx, planner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Tools).To(Equal([]string{"declared", "fetch", "plan", "search", "summarize", "translate"}))
	g.Expect(p.count()).To(Equal(3))
	_, err = reg.Register(ctx, planner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.count()).To(Equal(3), "nothing changed, nothing written")

	// Twenty heartbeats leave no session on either server and write nothing.
	for range 20 {
		for _, a := range []*Agent{planner, coder} {
			res, err := reg.Heartbeat(ctx, a)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(Healthy))
		}
	}
	g.Eventually(legacy.sessions).Should(BeZero())
	g.Eventually(modern.sessions).Should(BeZero())
	g.Expect(p.count()).To(Equal(3))

	// The server is killed: three failed heartbeats deregister it.
	legacy.web.Close()
	var results []HeartbeatResult
	for range MaxStrikes {
		res, err := reg.Heartbeat(ctx, planner)
		g.Expect(err).To(MatchError(ErrHandshake))
		results = append(results, res)
	}
	g.Expect(results).To(Equal([]HeartbeatResult{Strike, Strike, Deregistered}))
	_, ok := r.Get(planner.Key())
	g.Expect(ok).To(BeFalse())

	// It comes back (a new pod): the next successful heartbeat registers it again.
	back := startAgent(t, nil, false, "search")
	g.Expect(dial.Add("planner.team-a.svc:8080=" + back.addr())).To(Succeed())
	res, err := reg.Heartbeat(ctx, planner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(Missing))
	e, ok = r.Get(planner.Key())
	g.Expect(ok).To(BeTrue())
	g.Expect(e.Tools).To(Equal([]string{"declared", "search"}))

	// Deletion: deregistered before the finalizer goes.
	g.Expect(reg.Deregister(ctx, coder)).To(Succeed())
	g.Expect(r.Len()).To(Equal(1))
}

func TestRegisterHandshakeFailure(t *testing.T) {
	g := NewWithT(t)
	r, _, p := newTestRegistry()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "oops", http.StatusInternalServerError)
	}))
	defer bad.Close()
	_, client := dialThrough(t, "x.team-a.svc:8080="+strings.TrimPrefix(bad.URL, "http://"))
	reg := &Prober{Registry: r, Client: client}
	_, err := reg.Register(context.Background(), &Agent{Namespace: "team-a", Name: "x", Port: 8080})
	g.Expect(err).To(MatchError(ErrHandshake))
	g.Expect(r.Len()).To(BeZero())
	g.Expect(p.count()).To(BeZero())
}

// The endpoint is always the agent Service's in-cluster URL; development and tests send the connection
// elsewhere with the client's dialer, never by changing the URL.
func TestAgentEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent Agent
		want  string
	}{
		{"default path", Agent{Namespace: "ns", Name: "a", Port: 8080}, "http://a.ns.svc:8080/mcp"},
		{"custom path without slash", Agent{Namespace: "ns", Name: "a", Port: 80, Path: "rpc"}, "http://a.ns.svc:80/rpc"},
		{"custom path", Agent{Namespace: "team-a", Name: "planner", Port: 41234, Path: "/x/mcp"},
			"http://planner.team-a.svc:41234/x/mcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(tc.agent.Endpoint()).To(Equal(tc.want))
		})
	}
}

// dialThrough returns a dial map of in-cluster addresses to local agents and an MCP client that dials through it.
func dialThrough(t *testing.T, entries string) (*devdial.Map, *mcp.Client) {
	t.Helper()
	m, err := devdial.Parse(entries)
	if err != nil {
		t.Fatal(err)
	}
	return m, &mcp.Client{CallTimeout: 2 * time.Second, HTTP: m.HTTPClient()}
}
