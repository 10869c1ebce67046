package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
)

// managedSetup registers team-a/planner through the Prober (what the AgentDeployment reconciler does) and
// serves the API with a writer allowed in team-a.
func managedSetup(t *testing.T, opts *sdk.ServerOptions) (*Registry, apiClient) {
	t.Helper()
	r, _, _ := newTestRegistry()
	agent := startAgent(t, opts, false)
	agent.srv.AddTool(&sdk.Tool{Name: "search", Title: "Search", Description: "Finds pages.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}}},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{}, nil
		})
	_, client := dialThrough(t, "planner.team-a.svc:8080="+agent.addr())
	reg := &Prober{Registry: r, Client: client}
	_, err := reg.Register(context.Background(), &Agent{Namespace: "team-a", Name: "planner", Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(Handler(r, StaticToken(testToken)))
	t.Cleanup(srv.Close)
	return r, apiClient{t: t, url: srv.URL, http: srv.Client()}
}

// An allowed writer of the namespace cannot overwrite or delete an entry the operator manages: 409 naming the
// owner, and the entry keeps the operator's endpoint.
func TestOperatorManagedEntryIsNotOverwritten(t *testing.T) {
	g := NewWithT(t)
	r, c := managedSetup(t, nil)
	forged := `{"namespace":"team-a","name":"planner","endpoint":"http://evil.example:80/mcp","tools":["x"]}`
	status, _, body := c.do("POST", "/agents", testToken, forged)
	g.Expect(status).To(Equal(409), string(body))
	g.Expect(string(body)).To(ContainSubstring("AgentDeployment team-a/planner"))
	status, _, body = c.do("DELETE", "/agents/team-a/planner", testToken, "")
	g.Expect(status).To(Equal(409), string(body))
	e, ok := r.Get(Key{Namespace: "team-a", Name: "planner"})
	g.Expect(ok).To(BeTrue())
	g.Expect(e.Endpoint).To(Equal("http://planner.team-a.svc:8080/mcp"))
	// An entry the writer made itself stays the writer's to change.
	status, _, body = c.do("POST", "/agents", testToken, postBody("mine"))
	g.Expect(status).To(Equal(201), string(body))
	status, _, body = c.do("POST", "/agents", testToken, postBody("mine", "t"))
	g.Expect(status).To(Equal(200), string(body))
}

// The entry records the negotiated revision and each tool's title, description and input schema, and both
// views serve them.
func TestRegistryServesRevisionAndToolMetadata(t *testing.T) {
	g := NewWithT(t)
	_, c := managedSetup(t, &sdk.ServerOptions{SupportedProtocolVersions: []string{"2025-03-26"}})
	status, _, body := c.do("GET", "/agents/team-a/planner", "", "")
	g.Expect(status).To(Equal(200))
	var e map[string]any
	g.Expect(json.Unmarshal(body, &e)).To(Succeed())
	g.Expect(e).To(HaveKeyWithValue("protocolVersion", "2025-03-26"))
	g.Expect(e).To(HaveKeyWithValue("toolInfo", ConsistOf(And(HaveKeyWithValue("name", "search"),
		HaveKeyWithValue("title", "Search"), HaveKeyWithValue("description", "Finds pages."),
		HaveKeyWithValue("inputSchema", HaveKeyWithValue("type", "object"))))))
	status, _, body = c.do("GET", "/v0.1/servers", "", "")
	g.Expect(status).To(Equal(200))
	g.Expect(string(body)).To(ContainSubstring(`"protocolVersion":"2025-03-26"`))
	g.Expect(string(body)).To(ContainSubstring(`"inputSchema":{`))
	g.Expect(strings.Count(string(body), `"title":"Search"`)).To(Equal(1))
}

func schemaOf(n int) json.RawMessage {
	return json.RawMessage(`{"type":"object","description":"` + strings.Repeat("s", n) + `"}`)
}

// The budget drops input schemas (largest first), then cuts descriptions, then drops titles and descriptions;
// names always stay.
func TestFitToolInfo(t *testing.T) {
	long := strings.Repeat("d", 1000)
	cases := []struct {
		name        string
		tools       []mcp.Tool
		wantTrimmed bool
		check       func(Gomega, []ToolInfo)
	}{
		{"fits as listed, sorted, schema compacted", []mcp.Tool{{Name: "b", InputSchema: json.RawMessage(`{ "type" : "object" }`)}, {Name: "a", Title: "A"}}, false,
			func(g Gomega, out []ToolInfo) {
				g.Expect(out).To(HaveLen(2))
				g.Expect(out[0].Name).To(Equal("a"))
				g.Expect(string(out[1].InputSchema)).To(Equal(`{"type":"object"}`))
			}},
		{"duplicates and blank names dropped", []mcp.Tool{{Name: "a", Title: "first"}, {Name: "a", Title: "second"}, {Name: ""}}, false,
			func(g Gomega, out []ToolInfo) { g.Expect(out).To(Equal([]ToolInfo{{Name: "a", Title: "first"}})) }},
		{"largest schema goes first", []mcp.Tool{{Name: "big", InputSchema: schemaOf(8000)}, {Name: "small", InputSchema: schemaOf(500)}}, true,
			func(g Gomega, out []ToolInfo) {
				g.Expect(out[0].InputSchema).To(BeNil())
				g.Expect(out[1].InputSchema).NotTo(BeNil())
			}},
		{"then descriptions are cut", func() []mcp.Tool {
			var ts []mcp.Tool
			for i := range 12 {
				ts = append(ts, mcp.Tool{Name: fmt.Sprintf("t%02d", i), Title: "T", Description: long, InputSchema: schemaOf(100)})
			}
			return ts
		}(), true, func(g Gomega, out []ToolInfo) {
			g.Expect(out).To(HaveLen(12))
			for _, ti := range out {
				g.Expect(ti.InputSchema).To(BeNil())
				g.Expect(len(ti.Description)).To(BeNumerically("<=", MaxTrimmedDescription))
			}
		}},
		{"names only when nothing else fits", func() []mcp.Tool {
			var ts []mcp.Tool
			for i := range MaxTools {
				ts = append(ts, mcp.Tool{Name: fmt.Sprintf("%0*d", 100, i), Title: "T", Description: long})
			}
			return ts
		}(), true, func(g Gomega, out []ToolInfo) { g.Expect(out).To(BeNil()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out, trimmed := FitToolInfo(tc.tools)
			g.Expect(trimmed).To(Equal(tc.wantTrimmed))
			g.Expect(toolInfoSize(out)).To(BeNumerically("<=", MaxToolInfoBytes))
			g.Expect(validateToolInfo(out)).To(Succeed())
			tc.check(g, out)
		})
	}
}

// TestRegistryCapacity measures how many agents the ConfigMap holds (docs/mcp-registry.md quotes the log):
// a typical agent (8 tools with a title, a 100-byte description and a 300-byte schema) and an agent using its
// whole tool-metadata budget.
func TestRegistryCapacity(t *testing.T) {
	fill := func(tools []mcp.Tool) (int, int) {
		r := New(Options{MaxEntries: 100000})
		r.SetLeader(true)
		info, _ := FitToolInfo(tools)
		names := mcp.MergeTools(tools, nil)
		n := 0
		for ; ; n++ {
			e := Entry{Namespace: "team-a", Name: fmt.Sprintf("agent-%05d", n), Endpoint: fmt.Sprintf("http://agent-%05d.team-a.svc:8080/mcp", n),
				Tools: names, ToolInfo: info, ProtocolVersion: "2025-11-25", Version: "1.2.3", ManagedBy: fmt.Sprintf("AgentDeployment team-a/agent-%05d", n)}
			if _, err := r.Register(context.Background(), e); err != nil {
				break
			}
		}
		data, _ := EncodeState(r.List())
		return n, len(data)
	}
	g := NewWithT(t)
	var typical []mcp.Tool
	for i := range 8 {
		typical = append(typical, mcp.Tool{Name: fmt.Sprintf("tool-%d", i), Title: "Tool", Description: strings.Repeat("d", 100), InputSchema: schemaOf(270)})
	}
	n, size := fill(typical)
	t.Logf("typical agents (8 tools, 100 B descriptions, 300 B schemas): %d fit, state %d bytes", n, size)
	g.Expect(n).To(BeNumerically(">=", 200))
	g.Expect(size).To(BeNumerically("<=", MaxStateBytes))
	var full []mcp.Tool
	for i := range 16 {
		full = append(full, mcp.Tool{Name: fmt.Sprintf("tool-%d", i), Title: "Tool", Description: strings.Repeat("d", 200), InputSchema: schemaOf(2000)})
	}
	info, trimmed := FitToolInfo(full)
	g.Expect(trimmed).To(BeTrue())
	g.Expect(toolInfoSize(info)).To(BeNumerically(">", MaxToolInfoBytes-600))
	n, size = fill(full)
	t.Logf("agents at the full %d-byte metadata budget: %d fit, state %d bytes", MaxToolInfoBytes, n, size)
	g.Expect(n).To(BeNumerically(">=", 100))
	g.Expect(size).To(BeNumerically("<=", MaxStateBytes))
}
