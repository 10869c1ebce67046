package registry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/mcp"
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
	a.web = httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
		&sdk.StreamableHTTPOptions{Stateless: stateless}))
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

func TestRegistrarLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, _, p := newTestRegistry()
	// A legacy (stateful) agent with a paginated tool list, and a modern (stateless) one.
	legacy := startAgent(t, &sdk.ServerOptions{PageSize: 2}, false, "search", "summarize", "plan", "fetch", "rank")
	modern := startAgent(t, &sdk.ServerOptions{PageSize: 2}, true, "code", "test", "review")
	planner := &Agent{Namespace: "team-a", Name: "planner", Port: 8080, Tools: []string{"declared", "search"}}
	coder := &Agent{Namespace: "team-a", Name: "coder", Port: 9000, Path: "mcp", Version: "2.0.1"}
	reg := &Registrar{Registry: r, Client: &mcp.Client{CallTimeout: 2 * time.Second}, Hosts: HostMap{
		"planner.team-a.svc:8080": legacy.addr(),
		"coder.team-a.svc:9000":   modern.addr(),
	}}

	// Register and discover.
	e, err := reg.Register(ctx, planner)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.Tools).To(Equal([]string{"declared", "fetch", "plan", "rank", "search", "summarize"}))
	g.Expect(e.Endpoint).To(Equal(legacy.web.URL + "/mcp"))
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
	reg.Hosts["planner.team-a.svc:8080"] = back.addr()
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
	reg := &Registrar{Registry: r, Client: &mcp.Client{}, Hosts: HostMap{
		"x.team-a.svc:8080": strings.TrimPrefix(bad.URL, "http://")}}
	_, err := reg.Register(context.Background(), &Agent{Namespace: "team-a", Name: "x", Port: 8080})
	g.Expect(err).To(MatchError(ErrHandshake))
	g.Expect(r.Len()).To(BeZero())
	g.Expect(p.count()).To(BeZero())
}

func TestHostMap(t *testing.T) {
	cases := []struct {
		name    string
		flag    string
		agent   Agent
		want    string
		wantErr bool
	}{
		{"in-cluster default path", "", Agent{Namespace: "ns", Name: "a", Port: 8080}, "http://a.ns.svc:8080/mcp", false},
		{"custom path without slash", "", Agent{Namespace: "ns", Name: "a", Port: 80, Path: "rpc"},
			"http://a.ns.svc:80/rpc", false},
		{"mapped to loopback", "a.ns.svc:8080=127.0.0.1:4000, b.ns.svc:1=127.0.0.1:5000",
			Agent{Namespace: "ns", Name: "a", Port: 8080}, "http://127.0.0.1:4000/mcp", false},
		{"other port not mapped", "a.ns.svc:8080=127.0.0.1:4000", Agent{Namespace: "ns", Name: "a", Port: 9090},
			"http://a.ns.svc:9090/mcp", false},
		{"malformed", "a.ns.svc:8080", Agent{}, "", true},
		{"target with a path", "a=127.0.0.1:1/x", Agent{}, "", true},
		{"target without a port", "a.ns.svc:8080=127.0.0.1", Agent{}, "", true},
		{"wildcard keeps the port", "*=127.0.0.1", Agent{Namespace: "ns", Name: "a", Port: 41234},
			"http://127.0.0.1:41234/mcp", false},
		{"exact entry wins over the wildcard", "*=127.0.0.1,a.ns.svc:80=10.0.0.1:9000",
			Agent{Namespace: "ns", Name: "a", Port: 80}, "http://10.0.0.1:9000/mcp", false},
		{"wildcard to an IPv6 host", "*=::1", Agent{Namespace: "ns", Name: "a", Port: 80}, "http://[::1]:80/mcp", false},
		{"wildcard with a port", "*=127.0.0.1:80", Agent{}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			m, err := ParseHostMap(tc.flag)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.Endpoint(&tc.agent)).To(Equal(tc.want))
		})
	}
}

// Whatever the flag says, a host map that parses yields endpoints that are absolute http URLs with a host
// and the agent's path: a bad flag is refused at start, never turned into a request to a surprising place.
func FuzzParseHostMap(f *testing.F) {
	for _, seed := range []string{"", "*=127.0.0.1", "a.ns.svc:80=10.0.0.1:9000,*=::1", "a=b", "*=h:1", "x:1=y:2/z"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, flag string) {
		m, err := ParseHostMap(flag)
		if err != nil {
			return
		}
		for _, a := range []Agent{{Namespace: "ns", Name: "a", Port: 80}, {Namespace: "ns", Name: "b", Port: 8080, Path: "/x"}} {
			u, err := url.Parse(m.Endpoint(&a))
			if err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" || u.RawQuery != "" || u.Fragment != "" {
				t.Fatalf("flag %q: agent %s/%s: endpoint %q", flag, a.Namespace, a.Name, m.Endpoint(&a))
			}
		}
	})
}
