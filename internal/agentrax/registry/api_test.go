package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const testToken = "s3cret"

type apiClient struct {
	t    *testing.T
	url  string
	http *http.Client // http.DefaultClient when nil
}

func (c apiClient) do(method, path, token, body string) (int, http.Header, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := c.http
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func newTestAPI(t *testing.T) (*Registry, apiClient) {
	r, _, _ := newTestRegistry()
	srv := httptest.NewTLSServer(Handler(r, StaticToken(testToken)))
	t.Cleanup(srv.Close)
	return r, apiClient{t: t, url: srv.URL, http: srv.Client()}
}

func postBody(name string, tools ...string) string {
	const ns = "a"
	b, _ := json.Marshal(map[string]any{"namespace": ns, "name": name,
		"endpoint": fmt.Sprintf("http://%s.%s.svc:8080/mcp", name, ns), "tools": tools, "ttl": 120})
	return string(b)
}

func TestAgentsAPI(t *testing.T) {
	r, c := newTestAPI(t)
	cases := []struct {
		name, method, path, token, body string
		wantStatus                      int
		wantBody                        string
	}{
		{"list empty", "GET", "/agents", "", "", 200, `[]`},
		{"post without token", "POST", "/agents", "", postBody("x"), 401, `"error":"a bearer token is required"`},
		{"post with a wrong token", "POST", "/agents", "nope", postBody("x"), 401, `"error":"invalid token"`},
		{"delete without token", "DELETE", "/agents/a/x", "", "", 401, `"error"`},
		{"post", "POST", "/agents", testToken, postBody("x", "t2", "t1"), 201, `"tools":["t1","t2"]`},
		{"post again, same content", "POST", "/agents", testToken, postBody("x", "t1", "t2"), 200, `"ttl":120`},
		{"get", "GET", "/agents/a/x", "", "", 200, `"endpoint":"http://x.a.svc:8080/mcp"`},
		{"get missing", "GET", "/agents/a/y", "", "", 404, `{"error":"agent a/y not registered"}`},
		{"list", "GET", "/agents", "", "", 200, `[{"namespace":"a","name":"x"`},
		{"bad ttl", "POST", "/agents", testToken, `{"namespace":"a","name":"x","endpoint":"http://x:1/","ttl":1}`,
			400, `ttl: must be between 30 and 86400 seconds`},
		{"unknown field", "POST", "/agents", testToken, `{"namespace":"a","name":"x","endpoint":"http://x:1/","port":1}`,
			400, `unknown field`},
		{"body too large", "POST", "/agents", testToken, `{"namespace":"` + strings.Repeat("a", MaxBodyBytes) + `"}`,
			413, `body exceeds 65536 bytes`},
		{"delete", "DELETE", "/agents/a/x", testToken, "", 204, ``},
		{"delete again", "DELETE", "/agents/a/x", testToken, "", 404, `"error"`},
		{"wrong method", "PUT", "/agents", testToken, "", 405, `{"error":"method not allowed"}`},
		{"unknown path", "GET", "/nope", "", "", 404, `{"error":"not found"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, hdr, body := c.do(tc.method, tc.path, tc.token, tc.body)
			g.Expect(status).To(Equal(tc.wantStatus), string(body))
			g.Expect(string(body)).To(ContainSubstring(tc.wantBody))
			if status >= 400 {
				g.Expect(hdr.Get("Content-Type")).To(Equal("application/json"))
			}
			if status == 401 {
				g.Expect(hdr.Get("WWW-Authenticate")).To(HavePrefix("Bearer"))
			}
		})
	}
	g := NewWithT(t)
	g.Expect(r.Len()).To(BeZero())

	r.SetLeader(false)
	status, hdr, _ := c.do("POST", "/agents", testToken, postBody("y"))
	g.Expect(status).To(Equal(http.StatusServiceUnavailable), "a follower does not write")
	g.Expect(hdr.Get("Retry-After")).NotTo(BeEmpty())
	status, _, _ = c.do("POST", "/agents", "", postBody("x"))
	g.Expect(status).To(Equal(http.StatusUnauthorized), "authentication comes first")
}

type forbidAll struct{}

func (forbidAll) Authenticate(context.Context, string) (Identity, error) {
	return Identity{User: "u"}, ErrForbidden
}

type brokenAuth struct{}

func (brokenAuth) Authenticate(context.Context, string) (Identity, error) {
	return Identity{}, fmt.Errorf("token review: connection refused")
}

// scoped accepts every token as a writer of namespace ns only.
type scoped string

func (s scoped) Authenticate(context.Context, string) (Identity, error) {
	return Identity{User: "system:serviceaccount:" + string(s) + ":writer", Namespace: string(s)}, nil
}

func TestAuthOutcomes(t *testing.T) {
	cases := []struct {
		name string
		auth Authenticator
		want int
	}{
		{"no authenticator configured: writes impossible", nil, 401},
		{"forbidden identity", forbidAll{}, 403},
		{"authenticator unavailable", brokenAuth{}, 503},
		{"any of: forbidden wins over unauthenticated", AnyOf{StaticToken("other"), forbidAll{}}, 403},
		{"any of: one accepts", AnyOf{brokenAuth{}, StaticToken(testToken)}, 201},
		{"empty static token accepts nothing", StaticToken(""), 401},
		{"namespace-scoped writer, own namespace", scoped("a"), 201},
		{"namespace-scoped writer, other namespace", scoped("b"), 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r, _, _ := newTestRegistry()
			srv := httptest.NewTLSServer(Handler(r, tc.auth))
			defer srv.Close()
			status, _, body := apiClient{t: t, url: srv.URL, http: srv.Client()}.do("POST", "/agents", testToken, postBody("x"))
			g.Expect(status).To(Equal(tc.want), string(body))
		})
	}
}

type listResponse struct {
	Servers []struct {
		Server ServerJSON                 `json:"server"`
		Meta   map[string]json.RawMessage `json:"_meta"`
	} `json:"servers"`
	Metadata struct {
		Count      int    `json:"count"`
		NextCursor string `json:"nextCursor"`
	} `json:"metadata"`
}

func TestServersView(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, c := newTestAPI(t)
	for i := range 25 {
		e := entry(fmt.Sprintf("agent-%02d", i), "search", fmt.Sprintf("tool-%d", i))
		if i == 7 {
			e.Version = "1.4.0"
		}
		_, err := r.Register(ctx, e)
		g.Expect(err).NotTo(HaveOccurred())
	}

	// Walk the pages with the cursor.
	var names []string
	cursor := ""
	for page := 0; ; page++ {
		g.Expect(page).To(BeNumerically("<", 10))
		path := "/v0.1/servers?limit=10"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		status, _, body := c.do("GET", path, "", "")
		g.Expect(status).To(Equal(200), string(body))
		var lr listResponse
		g.Expect(json.Unmarshal(body, &lr)).To(Succeed())
		g.Expect(lr.Metadata.Count).To(Equal(len(lr.Servers)))
		for _, s := range lr.Servers {
			names = append(names, s.Server.Name)
		}
		if lr.Metadata.NextCursor == "" {
			break
		}
		cursor = lr.Metadata.NextCursor
	}
	g.Expect(names).To(HaveLen(25))
	g.Expect(names[0]).To(Equal("io.agentrax.team-a/agent-00"))
	g.Expect(names[24]).To(Equal("io.agentrax.team-a/agent-24"))

	// One item in full: server.json with the remote, tools under the namespaced _meta key, registry metadata.
	status, _, body := c.do("GET", "/v0.1/servers?search=AGENT-07", "", "")
	g.Expect(status).To(Equal(200))
	var lr listResponse
	g.Expect(json.Unmarshal(body, &lr)).To(Succeed())
	g.Expect(lr.Servers).To(HaveLen(1))
	s := lr.Servers[0]
	g.Expect(s.Server.Version).To(Equal("1.4.0"))
	g.Expect(s.Server.Remotes).To(Equal([]Remote{{Type: "streamable-http", URL: "http://agent-07.team-a.svc:8080/mcp"}}))
	agentMeta, _ := json.Marshal(s.Server.Meta[MetaAgent])
	g.Expect(string(agentMeta)).To(ContainSubstring(`"tools":["search","tool-7"]`))
	g.Expect(string(s.Meta[MetaOfficial])).To(ContainSubstring(`"isLatest":true`))

	name := "io.agentrax.team-a/agent-07"
	for _, tc := range []struct {
		path string
		want int
	}{
		{ServerPath(name), 200},
		{ServerPath(name) + "/latest", 200},
		{ServerPath(name) + "/1.4.0", 200},
		{ServerPath(name) + "/1.3.0", 404},
		{ServerPath("io.agentrax.team-a/nope") + "/latest", 404},
		{"/v0.1/servers?limit=0", 400},
		{"/v0.1/servers?limit=101", 400},
		{"/v0.1/servers?cursor=!!!", 400},
		{"/v0.1/servers?updated_since=yesterday", 400},
		{"/v0.1/servers?version=1.0.0", 400},
		{"/v0.1/servers?version=latest&updated_since=2020-01-01T00:00:00Z", 200},
	} {
		status, _, body := c.do("GET", tc.path, "", "")
		g.Expect(status).To(Equal(tc.want), tc.path+": "+string(body))
	}
	_, _, body = c.do("GET", ServerPath(name)+"/latest", "", "")
	g.Expect(string(body)).To(HavePrefix(`{"server":{"name":"io.agentrax.team-a/agent-07"`))
	_, _, body = c.do("GET", ServerPath(name), "", "")
	g.Expect(string(body)).To(HaveSuffix(`],"metadata":{"count":1}}`))
	_, _, body = c.do("GET", "/v0.1/servers?updated_since=2099-01-01T00:00:00Z", "", "")
	g.Expect(string(body)).To(Equal(`{"servers":[],"metadata":{"count":0}}`))
}

// The read view is cached per registry version: a read after a write sees the write.
func TestReadsFollowWrites(t *testing.T) {
	g := NewWithT(t)
	_, c := newTestAPI(t)
	_, _, before := c.do("GET", "/agents", "", "")
	status, _, _ := c.do("POST", "/agents", testToken, postBody("x"))
	g.Expect(status).To(Equal(201))
	_, _, after := c.do("GET", "/agents", "", "")
	g.Expect(after).NotTo(Equal(before))
	_, _, servers := c.do("GET", "/v0.1/servers", "", "")
	g.Expect(string(servers)).To(ContainSubstring(`"name":"io.agentrax.a/x"`))
}

// A namespace-scoped writer deletes only its own namespace's agents; a full registry answers 507 and keeps
// what it has, while updates of registered agents still go through.
func TestScopedDeleteAndEntryCap(t *testing.T) {
	g := NewWithT(t)
	r := New(Options{MaxEntries: 2})
	r.SetLeader(true)
	admin := httptest.NewTLSServer(Handler(r, StaticToken(testToken)))
	defer admin.Close()
	other := httptest.NewTLSServer(Handler(r, scoped("b")))
	defer other.Close()
	c, o := apiClient{t: t, url: admin.URL, http: admin.Client()}, apiClient{t: t, url: other.URL, http: other.Client()}

	for _, name := range []string{"x", "y"} {
		status, _, body := c.do("POST", "/agents", testToken, postBody(name))
		g.Expect(status).To(Equal(http.StatusCreated), string(body))
	}
	status, _, body := o.do("DELETE", "/agents/a/x", "any", "")
	g.Expect(status).To(Equal(http.StatusForbidden))
	g.Expect(string(body)).To(ContainSubstring(`may only write agents of namespace \"b\", not \"a\"`))
	g.Expect(r.Len()).To(Equal(2))

	status, _, body = c.do("POST", "/agents", testToken, postBody("z"))
	g.Expect(status).To(Equal(http.StatusInsufficientStorage))
	g.Expect(string(body)).To(ContainSubstring("2 agents registered, the maximum"))
	status, _, body = c.do("POST", "/agents", testToken, postBody("x", "new-tool"))
	g.Expect(status).To(Equal(http.StatusOK), string(body))
	g.Expect(r.Len()).To(Equal(2))
}

// The size budget refuses an entry that would push the state past what one ConfigMap holds.
func TestStateSizeBudget(t *testing.T) {
	g := NewWithT(t)
	r := New(Options{})
	r.SetLeader(true)
	tools := make([]string, MaxTools)
	for i := range tools {
		tools[i] = fmt.Sprintf("%0*d", MaxToolNameLen, i)
	}
	var err error
	n := 0
	for ; err == nil; n++ {
		_, err = r.Register(context.Background(), Entry{Namespace: "a", Name: fmt.Sprintf("big-%d", n),
			Endpoint: "http://big.a.svc:8080/mcp", Tools: tools})
	}
	g.Expect(err).To(MatchError(ErrFull))
	g.Expect(err.Error()).To(ContainSubstring("byte budget"))
	data, encErr := EncodeState(r.List())
	g.Expect(encErr).NotTo(HaveOccurred())
	g.Expect(len(data)).To(BeNumerically("<=", MaxStateBytes))
	g.Expect(r.Len()).To(Equal(n - 1))
	// Removing one makes room again.
	_, err = r.Deregister(context.Background(), Key{Namespace: "a", Name: "big-0"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = r.Register(context.Background(), Entry{Namespace: "a", Name: "big-0", Endpoint: "http://big.a.svc:8080/mcp",
		Tools: tools})
	g.Expect(err).NotTo(HaveOccurred())
}

// One namespace cannot fill the registry: a registration beyond the per-namespace cap answers 507 naming the
// namespace, while other namespaces still register and updates of the namespace's registered agents pass.
func TestPerNamespaceEntryCap(t *testing.T) {
	g := NewWithT(t)
	r := New(Options{MaxEntries: 10, MaxEntriesPerNamespace: 2})
	r.SetLeader(true)
	srv := httptest.NewTLSServer(Handler(r, StaticToken(testToken)))
	defer srv.Close()
	c := apiClient{t: t, url: srv.URL, http: srv.Client()}
	for _, name := range []string{"x", "y"} {
		status, _, body := c.do("POST", "/agents", testToken, postBody(name))
		g.Expect(status).To(Equal(http.StatusCreated), string(body))
	}
	status, _, body := c.do("POST", "/agents", testToken, postBody("z"))
	g.Expect(status).To(Equal(http.StatusInsufficientStorage), string(body))
	g.Expect(string(body)).To(ContainSubstring(`2 agents of namespace \"a\" registered, the maximum per namespace`))
	status, _, body = c.do("POST", "/agents", testToken, postBody("x", "new-tool"))
	g.Expect(status).To(Equal(http.StatusOK), string(body))
	_, err := r.Register(context.Background(), Entry{Namespace: "b", Name: "z", Endpoint: "http://z.b.svc:8080/mcp"})
	g.Expect(err).NotTo(HaveOccurred(), "another namespace still has room")
	// A removal frees the namespace's room.
	_, err = r.Deregister(context.Background(), Key{Namespace: "a", Name: "y"})
	g.Expect(err).NotTo(HaveOccurred())
	status, _, body = c.do("POST", "/agents", testToken, postBody("z"))
	g.Expect(status).To(Equal(http.StatusCreated), string(body))
	// The default leaves no namespace more than a quarter of the registry.
	g.Expect(New(Options{}).opts.MaxEntriesPerNamespace).To(Equal(DefaultMaxEntries / 4))
}
