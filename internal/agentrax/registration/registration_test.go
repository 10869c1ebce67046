package registration

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
)

// agentServer is a real MCP server (official Go SDK) on loopback that counts the methods it receives.
type agentServer struct {
	srv *sdk.Server
	web *httptest.Server

	mu      sync.Mutex
	methods map[string]int
	tools   []string
}

func startAgent(t *testing.T, tools ...string) *agentServer {
	a := &agentServer{srv: sdk.NewServer(&sdk.Implementation{Name: "agent", Version: "1"}, nil), methods: map[string]int{}}
	a.srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, m string, req sdk.Request) (sdk.Result, error) {
			a.mu.Lock()
			a.methods[m]++
			a.mu.Unlock()
			return next(ctx, m, req)
		}
	})
	a.setTools(tools...)
	// It stands in for an agent's pod: requests carry the Service's in-cluster Host header (the dial map sends
	// the connection to loopback), which the SDK's DNS-rebinding guard of loopback servers would refuse.
	a.web = httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return a.srv },
		&sdk.StreamableHTTPOptions{DisableLocalhostProtection: true}))
	t.Cleanup(a.web.Close)
	return a
}

func (a *agentServer) setTools(names ...string) {
	a.srv.RemoveTools(a.tools...)
	a.tools = names
	for _, n := range names {
		a.srv.AddTool(&sdk.Tool{Name: n, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{}, nil
			})
	}
}

func (a *agentServer) count(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.methods[method]
}

func TestAdapterDiscoversHeartbeatsAndRediscoversOnPromotion(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	reg := registry.New(registry.Options{Clock: clk})
	reg.SetLeader(true)
	agent := startAgent(t, "search", "plan")
	interval := registry.HealthInterval(registry.DefaultTTL, time.Minute, 5*time.Second)
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "planner"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{Port: 8080,
			MCP: &agentraxv1alpha1.MCPSpec{Expose: true, Tools: []string{"declared"}}},
		Status: agentraxv1alpha1.AgentDeploymentStatus{StableVersion: "ghcr.io/org/planner:v1"},
	}
	adapter := &Adapter{Interval: interval, Clock: clk, Prober: &registry.Prober{
		Registry: reg, Client: dialThrough(t, "planner.team-a.svc:8080="+strings.TrimPrefix(agent.web.URL, "http://")),
	}}
	key := registry.Key{Namespace: "team-a", Name: "planner"}

	ok, err := adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	e, _ := reg.Get(key)
	g.Expect(e.Tools).To(Equal([]string{"declared", "plan", "search"}))
	g.Expect(e.Version).To(Equal("v1"))
	g.Expect(agent.count("tools/list")).To(Equal(1))

	// Reconciles within the interval do not touch the agent.
	for range 5 {
		ok, err = adapter.Register(ctx, ad)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
	}
	g.Expect(agent.count("initialize")).To(Equal(1))

	// Once the interval has passed, a reconcile heartbeats (no tools/list).
	clk.Step(interval)
	ok, err = adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(agent.count("ping")).To(Equal(1))
	g.Expect(agent.count("tools/list")).To(Equal(1))

	// Canary promotion: a new stable image with other tools is discovered again.
	agent.setTools("search", "plan", "critique")
	ad.Status.StableVersion = "ghcr.io/org/planner:v2"
	ok, err = adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	e, _ = reg.Get(key)
	g.Expect(e.Tools).To(Equal([]string{"critique", "declared", "plan", "search"}))
	g.Expect(e.Version).To(Equal("v2"))

	// The agent stops answering: strikes keep it registered until the third, which reports the failure.
	agent.web.Close()
	var got []bool
	for range registry.MaxStrikes {
		clk.Step(interval)
		ok, err = adapter.Register(ctx, ad)
		got = append(got, ok)
	}
	g.Expect(got).To(Equal([]bool{true, true, false}))
	g.Expect(err).To(MatchError(registry.ErrHandshake))
	_, present := reg.Get(key)
	g.Expect(present).To(BeFalse())

	g.Expect(adapter.Deregister(ctx, ad)).To(Succeed(), "deregistering an absent agent is not an error")
}

// A change of the declared tools or of the MCP path is a new discovery; a registered agent whose rediscovery
// fails (a promoted image that does not answer) is judged by the strike rule, not dropped at once.
func TestAdapterRediscovery(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registry.New(registry.Options{})
	reg.SetLeader(true)
	agent := startAgent(t, "search")
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "planner"},
		Spec: agentraxv1alpha1.AgentDeploymentSpec{Port: 8080,
			MCP: &agentraxv1alpha1.MCPSpec{Expose: true, Tools: []string{"declared"}, Path: "/mcp"}},
		Status: agentraxv1alpha1.AgentDeploymentStatus{StableVersion: "ghcr.io/org/planner:v1"},
	}
	adapter := &Adapter{Interval: time.Hour, Prober: &registry.Prober{Registry: reg, Client: dialThrough(t, "*.svc:*=127.0.0.1")}}
	ad.Spec.Port = int32(agent.web.Listener.Addr().(*net.TCPAddr).Port)
	key := registry.Key{Namespace: "team-a", Name: "planner"}
	g.Expect(adapter.HeartbeatInterval()).To(Equal(time.Hour))

	ok, err := adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	ad.Spec.MCP.Tools = nil
	_, err = adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	e, _ := reg.Get(key)
	g.Expect(e.Tools).To(Equal([]string{"search"}), "a tool dropped from spec.mcp.tools leaves at once")
	g.Expect(agent.count("tools/list")).To(Equal(2))

	ad.Spec.MCP.Path = "/v2/mcp"
	_, err = adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	e, _ = reg.Get(key)
	g.Expect(e.Endpoint).To(Equal("http://planner.team-a.svc:" + strconv.Itoa(int(ad.Spec.Port)) + "/v2/mcp"))
	g.Expect(agent.count("tools/list")).To(Equal(3))

	// Promoted to an image whose server does not answer.
	agent.web.Close()
	ad.Status.StableVersion = "ghcr.io/org/planner:v2"
	var got []bool
	for range registry.MaxStrikes {
		ok, err = adapter.Register(ctx, ad)
		got = append(got, ok)
	}
	g.Expect(got).To(Equal([]bool{true, true, false}))
	g.Expect(err).To(MatchError(registry.ErrHandshake))
	_, present := reg.Get(key)
	g.Expect(present).To(BeFalse())
}

// Tools a server adds without a new image show up after RelistInterval (a re-list, not just a heartbeat).
func TestAdapterRelistsOnInterval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	reg := registry.New(registry.Options{Clock: clk})
	reg.SetLeader(true)
	agent := startAgent(t, "search")
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "planner"},
		Spec:       agentraxv1alpha1.AgentDeploymentSpec{Port: 8080, MCP: &agentraxv1alpha1.MCPSpec{Expose: true}},
		Status:     agentraxv1alpha1.AgentDeploymentStatus{StableVersion: "ghcr.io/org/planner:v1"},
	}
	adapter := &Adapter{Interval: 30 * time.Second, RelistInterval: 5 * time.Minute, Clock: clk, Prober: &registry.Prober{
		Registry: reg, Client: dialThrough(t, "planner.team-a.svc:8080="+strings.TrimPrefix(agent.web.URL, "http://")),
	}}
	key := registry.Key{Namespace: "team-a", Name: "planner"}
	_, err := adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	agent.setTools("search", "translate")
	clk.Step(time.Minute)
	_, err = adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	e, _ := reg.Get(key)
	g.Expect(e.Tools).To(Equal([]string{"search"}), "a heartbeat does not list")
	clk.Step(4 * time.Minute)
	_, err = adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	e, _ = reg.Get(key)
	g.Expect(e.Tools).To(Equal([]string{"search", "translate"}))
	g.Expect(agent.count("tools/list")).To(Equal(2))
}

func TestImageTag(t *testing.T) {
	cases := map[string]string{
		"ghcr.io/org/agent:v1.2.3":          "v1.2.3",
		"registry:5000/agent":               "",
		"registry:5000/agent:1.0":           "1.0",
		"agent@sha256:0123456789abcdef":     "",
		"agent:2.0@sha256:0123456789abcdef": "2.0",
		"":                                  "",
		"agent:" + strings.Repeat("x", 65):  "",
	}
	for image, want := range cases {
		t.Run(image, func(t *testing.T) {
			NewWithT(t).Expect(imageTag(image)).To(Equal(want))
		})
	}
}

// dialThrough returns an MCP client whose connections to the in-cluster addresses listed (QUARTET_DEV_DIAL_MAP
// syntax) go to the local agents instead.
func dialThrough(t *testing.T, entries string) *mcp.Client {
	t.Helper()
	m, err := devdial.Parse(entries)
	if err != nil {
		t.Fatal(err)
	}
	return &mcp.Client{HTTP: m.HTTPClient()}
}
