// Package registry is the Agentrax MCP discovery registry: the store of registered agents, its TTL sweeper and
// heartbeat strike counter, the persisted state format, and the HTTP API (the seed's /agents endpoints and a
// read view compatible with the official MCP Registry API).
package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TTL bounds and defaults. The minimum equals the sweep period: a shorter TTL could not be honoured anyway.
const (
	DefaultTTL    = 90 * time.Second
	MinTTL        = 30 * time.Second
	MaxTTL        = 24 * time.Hour
	SweepInterval = 30 * time.Second
	// MaxStrikes consecutive failed heartbeats deregister an agent.
	MaxStrikes = 3
	// MaxTools and MaxToolNameLen keep one entry from bloating the ConfigMap (1 MiB for all agents).
	MaxTools       = 256
	MaxToolNameLen = 128
	MaxVersionLen  = 64
)

// Key names an agent: its AgentDeployment's namespace and name.
type Key struct {
	Namespace string
	Name      string
}

// String is "namespace/name".
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Entry is one registered agent as served by GET /agents and persisted in the ConfigMap.
type Entry struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Endpoint  string   `json:"endpoint"`
	Tools     []string `json:"tools"`
	// Version is optional (the agent's stable version); it becomes server.json's version in the MCP view.
	Version      string    `json:"version,omitempty"`
	RegisteredAt time.Time `json:"registeredAt"`
	// HeartbeatAt is the last heartbeat recorded in the persisted state. Heartbeats that change nothing are
	// kept in the leader's memory only, so a steady registry writes nothing; see docs/mcp-registry.md.
	HeartbeatAt time.Time `json:"heartbeatAt"`
	// TTL is in seconds.
	TTL int64 `json:"ttl"`
	// ProtocolVersion is the MCP revision the last discovery negotiated (e.g. "2025-03-26").
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// ToolInfo is each discovered tool's name, title, description and input schema, within MaxToolInfoBytes;
	// ToolInfoTrimmed says the budget dropped something (toolinfo.go).
	ToolInfo        []ToolInfo `json:"toolInfo,omitempty"`
	ToolInfoTrimmed bool       `json:"toolInfoTrimmed,omitempty"`
	// ManagedBy names the owner of an entry the operator registered ("AgentDeployment <ns>/<name>"). Such an
	// entry cannot be overwritten or deleted through the API (409); the field cannot be set through it.
	ManagedBy string `json:"managedBy,omitempty"`
}

// Key returns the entry's key.
func (e *Entry) Key() Key { return Key{Namespace: e.Namespace, Name: e.Name} }

// ttl returns the entry's TTL as a duration, the default when unset.
func (e *Entry) ttl() time.Duration {
	if e.TTL <= 0 {
		return DefaultTTL
	}
	return time.Duration(e.TTL) * time.Second
}

// sameContent reports whether two entries publish the same thing; timestamps are not compared.
func (e *Entry) sameContent(o *Entry) bool {
	return e.Endpoint == o.Endpoint && e.Version == o.Version && e.TTL == o.TTL && slices.Equal(e.Tools, o.Tools) &&
		e.ProtocolVersion == o.ProtocolVersion && e.ToolInfoTrimmed == o.ToolInfoTrimmed && e.ManagedBy == o.ManagedBy &&
		sameToolInfo(e.ToolInfo, o.ToolInfo)
}

// Validate checks an entry coming from outside (POST /agents, the persisted state).
func (e *Entry) Validate() error {
	var errs []error
	if msgs := validation.IsDNS1123Label(e.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("namespace: %v", msgs))
	}
	if msgs := validation.IsDNS1123Subdomain(e.Name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("name: %v", msgs))
	}
	if u, err := url.Parse(e.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("endpoint: must be an absolute http or https URL"))
	}
	if len(e.Tools) > MaxTools {
		errs = append(errs, fmt.Errorf("tools: at most %d", MaxTools))
	}
	seen := make(map[string]bool, len(e.Tools))
	for _, t := range e.Tools {
		switch {
		case t == "" || len(t) > MaxToolNameLen:
			errs = append(errs, fmt.Errorf("tools: names must be 1-%d characters", MaxToolNameLen))
		case seen[t]:
			errs = append(errs, fmt.Errorf("tools: duplicate %q", t))
		}
		seen[t] = true
	}
	if err := validateToolInfo(e.ToolInfo); err != nil {
		errs = append(errs, err)
	}
	if len(e.ProtocolVersion) > MaxProtocolVersionLen {
		errs = append(errs, fmt.Errorf("protocolVersion: at most %d characters", MaxProtocolVersionLen))
	}
	if len(e.ManagedBy) > 300 {
		errs = append(errs, fmt.Errorf("managedBy: at most 300 characters"))
	}
	if len(e.Version) > MaxVersionLen {
		errs = append(errs, fmt.Errorf("version: at most %d characters", MaxVersionLen))
	}
	if e.TTL != 0 && (e.TTL < int64(MinTTL/time.Second) || e.TTL > int64(MaxTTL/time.Second)) {
		errs = append(errs, fmt.Errorf("ttl: must be between %d and %d seconds", int64(MinTTL/time.Second),
			int64(MaxTTL/time.Second)))
	}
	return errors.Join(errs...)
}

// normalize sorts the tools so equal content compares equal and encodes identically.
func (e *Entry) normalize() {
	e.Tools = slices.Clone(e.Tools)
	if e.Tools == nil {
		e.Tools = []string{}
	}
	slices.Sort(e.Tools)
	if len(e.ToolInfo) == 0 {
		e.ToolInfo = nil
		return
	}
	e.ToolInfo = slices.Clone(e.ToolInfo)
	for i := range e.ToolInfo {
		var buf bytes.Buffer
		if json.Compact(&buf, e.ToolInfo[i].InputSchema) == nil {
			e.ToolInfo[i].InputSchema = buf.Bytes()
		}
	}
	slices.SortStableFunc(e.ToolInfo, func(a, b ToolInfo) int { return cmpString(a.Name, b.Name) })
}

// stateVersion is the format version of the persisted state.
const stateVersion = 1

// state is the persisted form: a sorted list (not a map) so that the same registry always encodes to the
// same bytes and an unchanged registry is never rewritten.
type state struct {
	Version int     `json:"version"`
	Agents  []Entry `json:"agents"`
}

// EncodeState encodes entries (in any order) for the ConfigMap key `state`.
func EncodeState(entries []Entry) ([]byte, error) {
	s := state{Version: stateVersion, Agents: sortedEntries(entries)}
	return json.Marshal(s)
}

// DecodeState decodes the ConfigMap key `state`. Invalid entries are dropped and reported, so one bad entry
// does not cost the whole registry at cold start.
func DecodeState(data []byte) ([]Entry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("registry state: %w", err)
	}
	if s.Version != stateVersion {
		return nil, fmt.Errorf("registry state: unknown version %d", s.Version)
	}
	out := make([]Entry, 0, len(s.Agents))
	var errs []error
	seen := make(map[Key]bool, len(s.Agents))
	for _, e := range s.Agents {
		if err := e.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Key(), err))
			continue
		}
		if seen[e.Key()] {
			errs = append(errs, fmt.Errorf("%s: duplicate", e.Key()))
			continue
		}
		seen[e.Key()] = true
		e.normalize()
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

func sortedEntries(entries []Entry) []Entry {
	out := slices.Clone(entries)
	slices.SortFunc(out, func(a, b Entry) int {
		if a.Namespace != b.Namespace {
			return cmpString(a.Namespace, b.Namespace)
		}
		return cmpString(a.Name, b.Name)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
