package registry

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultServerNamePrefix starts every server.json name: `<prefix>.<namespace>/<name>`. Kubernetes namespaces
// are DNS labels, so the part before the slash stays a valid reverse-DNS name.
const DefaultServerNamePrefix = "io.agentrax"

// Keys of the _meta objects of the MCP Registry view.
const (
	// MetaAgent carries the agent's identity and tools inside server.json (server.json has no tools field).
	MetaAgent = "io.agentrax/agent"
	// MetaOfficial is the registry-managed metadata key that MCP Registry API clients read.
	MetaOfficial = "io.modelcontextprotocol.registry/official"
	// defaultServerVersion is served when an entry carries no version.
	defaultServerVersion = "0.0.0"
)

// ServerJSON is the server.json document of one agent.
type ServerJSON struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Title       string         `json:"title,omitempty"`
	Version     string         `json:"version"`
	Remotes     []Remote       `json:"remotes"`
	Meta        map[string]any `json:"_meta,omitempty"`
}

// Remote is a remote transport of server.json.
type Remote struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// AgentMeta is the value under MetaAgent.
type AgentMeta struct {
	Namespace   string    `json:"namespace"`
	Name        string    `json:"name"`
	Tools       []string  `json:"tools"`
	HeartbeatAt time.Time `json:"heartbeatAt"`
	TTL         int64     `json:"ttl"`
	// ProtocolVersion, ToolInfo, ToolInfoTrimmed and ManagedBy are the entry's (server.json has no tools).
	ProtocolVersion string     `json:"protocolVersion,omitempty"`
	ToolInfo        []ToolInfo `json:"toolInfo,omitempty"`
	ToolInfoTrimmed bool       `json:"toolInfoTrimmed,omitempty"`
	ManagedBy       string     `json:"managedBy,omitempty"`
}

// OfficialMeta is the value under MetaOfficial.
type OfficialMeta struct {
	Status      string    `json:"status"`
	PublishedAt time.Time `json:"publishedAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	IsLatest    bool      `json:"isLatest"`
}

// ServerResponse is one item of the list and the body of the versions endpoints.
type ServerResponse struct {
	Server ServerJSON     `json:"server"`
	Meta   map[string]any `json:"_meta"`
}

// ServerName returns the server.json name of an agent.
func ServerName(prefix string, k Key) string {
	return prefix + "." + k.Namespace + "/" + k.Name
}

// serverResponse renders an entry in the MCP Registry view. The registry keeps one version per agent (the
// running one), so every item is the latest.
func serverResponse(prefix string, e *Entry) ServerResponse {
	version := e.Version
	if version == "" {
		version = defaultServerVersion
	}
	return ServerResponse{
		Server: ServerJSON{
			Name:        ServerName(prefix, e.Key()),
			Description: fmt.Sprintf("Agentrax agent %s/%s", e.Namespace, e.Name),
			Title:       e.Name,
			Version:     version,
			Remotes:     []Remote{{Type: "streamable-http", URL: e.Endpoint}},
			Meta: map[string]any{MetaAgent: AgentMeta{
				Namespace: e.Namespace, Name: e.Name, Tools: e.Tools, HeartbeatAt: e.HeartbeatAt, TTL: e.TTL,
				ProtocolVersion: e.ProtocolVersion, ToolInfo: e.ToolInfo, ToolInfoTrimmed: e.ToolInfoTrimmed,
				ManagedBy: e.ManagedBy,
			}},
		},
		Meta: map[string]any{MetaOfficial: OfficialMeta{
			Status: "active", PublishedAt: e.RegisteredAt, UpdatedAt: e.HeartbeatAt, IsLatest: true,
		}},
	}
}

// serverItem is a pre-encoded list item: the list endpoint only concatenates these.
type serverItem struct {
	name      string
	lowerName string
	updatedAt time.Time
	json      []byte
}

// snapshot is the encoded read view of one registry version. It is immutable once built.
type snapshot struct {
	version    uint64
	agents     []Entry
	agentsJSON []byte
	servers    []serverItem // sorted by name
}

// snapshot returns the read view of the current version, building it at most once per version.
func (r *Registry) snapshot() *snapshot {
	r.mu.RLock()
	version := r.version
	s := r.snap.Load()
	r.mu.RUnlock()
	if s != nil && s.version == version {
		return s
	}
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	if s := r.snap.Load(); s != nil && s.version == version {
		return s
	}
	r.mu.RLock()
	s = &snapshot{version: r.version, agents: make([]Entry, 0, len(r.entries))}
	for _, e := range r.entries {
		s.agents = append(s.agents, e)
	}
	r.mu.RUnlock()
	s.agents = sortedEntries(s.agents)
	s.agentsJSON, _ = json.Marshal(s.agents)
	s.servers = make([]serverItem, 0, len(s.agents))
	for i := range s.agents {
		e := &s.agents[i]
		b, _ := json.Marshal(serverResponse(r.opts.ServerNamePrefix, e))
		name := ServerName(r.opts.ServerNamePrefix, e.Key())
		s.servers = append(s.servers, serverItem{name: name, lowerName: strings.ToLower(name), updatedAt: e.HeartbeatAt,
			json: b})
	}
	slices.SortFunc(s.servers, func(a, b serverItem) int { return cmpString(a.name, b.name) })
	r.snap.Store(s)
	return s
}

// Pagination of GET /v0.1/servers.
const (
	DefaultLimit = 30
	MaxLimit     = 100
)

// ServerQuery is the parsed query of GET /v0.1/servers.
type ServerQuery struct {
	Cursor       string // opaque: base64url of the last name of the previous page
	Limit        int
	Search       string // case-insensitive substring of the name
	UpdatedSince time.Time
}

// encodeCursor and decodeCursor keep the cursor opaque so clients do not build it themselves.
func encodeCursor(name string) string { return base64.RawURLEncoding.EncodeToString([]byte(name)) }

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", fmt.Errorf("invalid cursor")
	}
	return string(b), nil
}

// listServers appends the list response to buf: items after the cursor that match, up to the limit.
func (s *snapshot) listServers(buf []byte, q ServerQuery, after string) []byte {
	start := 0
	if after != "" {
		start, _ = slices.BinarySearchFunc(s.servers, after, func(it serverItem, n string) int { return cmpString(it.name, n) })
		if start < len(s.servers) && s.servers[start].name == after {
			start++
		}
	}
	search := strings.ToLower(q.Search)
	buf = append(buf, `{"servers":[`...)
	count, last, more := 0, "", false
	for i := start; i < len(s.servers); i++ {
		it := &s.servers[i]
		if search != "" && !strings.Contains(it.lowerName, search) {
			continue
		}
		if !q.UpdatedSince.IsZero() && it.updatedAt.Before(q.UpdatedSince) {
			continue
		}
		if count == q.Limit {
			more = true
			break
		}
		if count > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, it.json...)
		count++
		last = it.name
	}
	buf = append(buf, `],"metadata":{"count":`...)
	buf = fmt.Appendf(buf, "%d", count)
	if more {
		buf = append(buf, `,"nextCursor":`...)
		c, _ := json.Marshal(encodeCursor(last))
		buf = append(buf, c...)
	}
	return append(buf, "}}"...)
}

// server returns the pre-encoded item of one server name.
func (s *snapshot) server(name string) ([]byte, bool) {
	i, ok := slices.BinarySearchFunc(s.servers, name, func(it serverItem, n string) int { return cmpString(it.name, n) })
	if !ok {
		return nil, false
	}
	return s.servers[i].json, true
}
