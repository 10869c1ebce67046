package registration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// A tool the server adds at run time reaches the registry on notifications/tools/list_changed, long before the
// relist interval (an hour here) and without a reconcile: on the legacy revision through the session's GET
// stream, on the sessionless revision through subscriptions/listen.
func TestAdapterRelistsOnToolsListChanged(t *testing.T) {
	for name, stateless := range map[string]bool{"stateful (initialize, GET stream)": false, "sessionless (subscriptions/listen)": true} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			reg := registry.New(registry.Options{})
			reg.SetLeader(true)
			agent := startAgent(t, "search")
			// Every test server of this test counts the notification streams it holds open: a change announced
			// before the listener's stream is up would only be seen at the next relist (an hour here).
			var open atomic.Int32
			handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return agent.srv },
				&sdk.StreamableHTTPOptions{Stateless: stateless, DisableLocalhostProtection: true})
			web := httptest.NewServer(countStreams(&open, handler))
			t.Cleanup(web.Close)
			url := web.URL
			ad := &agentraxv1alpha1.AgentDeployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "planner"},
				Spec:       agentraxv1alpha1.AgentDeploymentSpec{Port: 8080, MCP: &agentraxv1alpha1.MCPSpec{Expose: true}},
				Status:     agentraxv1alpha1.AgentDeploymentStatus{StableVersion: "ghcr.io/org/planner:v1"},
			}
			adapter := &Adapter{Interval: time.Hour, RelistInterval: time.Hour, ListenForToolChanges: true,
				Prober: &registry.Prober{Registry: reg, Client: dialThrough(t, "planner.team-a.svc:8080="+strings.TrimPrefix(url, "http://"))}}
			done := make(chan error, 1)
			go func() { done <- adapter.Start(ctx) }()
			t.Cleanup(func() {
				cancel()
				g.Eventually(done).Should(Receive(BeNil()))
			})
			key := registry.Key{Namespace: "team-a", Name: "planner"}
			_, err := adapter.Register(ctx, ad)
			g.Expect(err).NotTo(HaveOccurred())
			e, _ := reg.Get(key)
			g.Expect(e.Tools).To(Equal([]string{"search"}))

			// The server adds tools after the listener is up (it may take a moment to open its stream; a tool
			// added before that is seen at the next list, which the test then also accepts).
			added := 0
			g.Eventually(func(g Gomega) {
				g.Eventually(open.Load, 10*time.Second, 50*time.Millisecond).Should(BeNumerically(">", 0),
					"the listener holds a notification stream")
				added++
				agent.setTools(append([]string{"search"}, strings.Repeat("t", added))...)
				g.Eventually(func(g Gomega) {
					e, _ := reg.Get(key)
					g.Expect(e.Tools).To(ContainElement(strings.Repeat("t", added)))
				}, 2*time.Second).Should(Succeed())
			}, 20*time.Second).Should(Succeed())
		})
	}
}

// countStreams keeps open at the number of notification streams in flight: a session's GET stream, or a
// subscriptions/listen request (whose reply stream stays open).
func countStreams(open *atomic.Int32, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stream := r.Method == http.MethodGet
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err == nil {
				stream = bytes.Contains(body, []byte(`"subscriptions/listen"`))
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if stream {
			open.Add(1)
			defer open.Add(-1)
		}
		next.ServeHTTP(w, r)
	})
}

// A server that does not offer tools.listChanged gets no standing stream: nothing beyond the discovery itself.
func TestAdapterDoesNotListenWhenTheServerDoesNotOfferListChanged(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := registry.New(registry.Options{})
	reg.SetLeader(true)
	srv := sdk.NewServer(&sdk.Implementation{Name: "agent", Version: "1"},
		&sdk.ServerOptions{Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: false}}})
	srv.AddTool(&sdk.Tool{Name: "search", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	gets := make(chan struct{}, 100)
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{DisableLocalhostProtection: true})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets <- struct{}{}
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(web.Close)
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "planner"},
		Spec:       agentraxv1alpha1.AgentDeploymentSpec{Port: 8080, MCP: &agentraxv1alpha1.MCPSpec{Expose: true}},
		Status:     agentraxv1alpha1.AgentDeploymentStatus{StableVersion: "ghcr.io/org/planner:v1"},
	}
	adapter := &Adapter{Interval: time.Hour, RelistInterval: time.Hour, ListenForToolChanges: true,
		Prober: &registry.Prober{Registry: reg, Client: dialThrough(t, "planner.team-a.svc:8080="+strings.TrimPrefix(web.URL, "http://"))}}
	go func() { _ = adapter.Start(ctx) }()
	_, err := adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(gets, time.Second).ShouldNot(Receive(), "no GET stream is opened")
	g.Eventually(adapter.listening).Should(BeFalse(), "the listener gave up: not offered")
}

// A tool-change announcement (or one arriving late, from a stream that outlived the deregistration) only
// updates the entry of a registered agent: once its managed entry was removed (strikes ran out, the agent was
// deregistered, the sweeper expired it) a relist never creates it again; only the reconciler's next discovery
// registers the agent.
func TestRelistNeverRecreatesADeletedEntry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg := registry.New(registry.Options{})
	reg.SetLeader(true)
	agent := startAgent(t, "search")
	ad := &agentraxv1alpha1.AgentDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "planner"},
		Spec:       agentraxv1alpha1.AgentDeploymentSpec{Port: 8080, MCP: &agentraxv1alpha1.MCPSpec{Expose: true}},
		Status:     agentraxv1alpha1.AgentDeploymentStatus{StableVersion: "ghcr.io/org/planner:v1"},
	}
	adapter := &Adapter{Interval: time.Hour, RelistInterval: time.Hour,
		Prober: &registry.Prober{Registry: reg, Client: dialThrough(t, "planner.team-a.svc:8080="+strings.TrimPrefix(agent.web.URL, "http://"))}}
	key := registry.Key{Namespace: "team-a", Name: "planner"}
	_, err := adapter.Register(ctx, ad)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := reg.Get(key)
	g.Expect(ok).To(BeTrue())
	a := AgentOf(ad)
	fp := fingerprint(ad, a)

	agent.setTools("search", "fetch")
	adapter.relist(ctx, key, fp, a)
	e, ok := reg.Get(key)
	g.Expect(ok).To(BeTrue())
	g.Expect(e.Tools).To(ConsistOf("search", "fetch"), "a registered agent's entry is updated")

	_, err = reg.Deregister(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	agent.setTools("search", "fetch", "write")
	adapter.relist(ctx, key, fp, a)
	_, ok = reg.Get(key)
	g.Expect(ok).To(BeFalse(), "the deleted managed entry stays deleted")
}
