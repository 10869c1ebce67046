package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/mcp"
)

// Tool metadata budget. The whole registry is one ConfigMap value (≤ 1 MiB, MaxStateBytes of it for the
// state), so each entry's tool metadata is held to MaxToolInfoBytes encoded. When a server lists more, the
// registry drops, in this order, until it fits (and sets ToolInfoTrimmed): input schemas, largest first;
// then descriptions cut to MaxTrimmedDescription bytes; then titles and descriptions altogether. Tool names
// are always kept in Tools. docs/mcp-registry.md has the measured capacity.
const (
	MaxToolInfoBytes      = 8 << 10
	MaxTrimmedDescription = 160
	MaxProtocolVersionLen = 32
)

// ToolInfo is one tool as its server listed it (tools/list), within the entry's budget.
type ToolInfo struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

func toolInfoSize(tools []ToolInfo) int {
	b, _ := json.Marshal(tools)
	return len(b)
}

// FitToolInfo turns discovered tools into ToolInfo sorted by name (first of each name kept, blank names
// dropped, schemas compacted) and trims it to MaxToolInfoBytes. It reports whether anything was dropped.
func FitToolInfo(discovered []mcp.Tool) ([]ToolInfo, bool) {
	out := make([]ToolInfo, 0, len(discovered))
	seen := map[string]bool{}
	for _, t := range discovered {
		if t.Name == "" || seen[t.Name] || len(t.Name) > MaxToolNameLen {
			continue
		}
		seen[t.Name] = true
		ti := ToolInfo{Name: t.Name, Title: t.Title, Description: t.Description}
		var buf bytes.Buffer
		if len(t.InputSchema) > 0 && json.Compact(&buf, t.InputSchema) == nil && buf.Len() > 0 && buf.Bytes()[0] == '{' {
			ti.InputSchema = buf.Bytes()
		}
		out = append(out, ti)
	}
	slices.SortFunc(out, func(a, b ToolInfo) int { return cmpString(a.Name, b.Name) })
	if len(out) == 0 {
		return nil, false
	}
	size := toolInfoSize(out)
	if size <= MaxToolInfoBytes {
		return out, false
	}
	// 1. Input schemas, largest first.
	bySchema := make([]int, len(out))
	for i := range bySchema {
		bySchema[i] = i
	}
	slices.SortStableFunc(bySchema, func(a, b int) int { return len(out[b].InputSchema) - len(out[a].InputSchema) })
	for _, i := range bySchema {
		if size <= MaxToolInfoBytes || len(out[i].InputSchema) == 0 {
			break
		}
		out[i].InputSchema = nil
		size = toolInfoSize(out)
	}
	// 2. Every description cut short (all alike, so no tool is favoured by its name's place in the order).
	if size > MaxToolInfoBytes {
		for i := range out {
			out[i].Description = truncateUTF8(out[i].Description, MaxTrimmedDescription)
		}
		size = toolInfoSize(out)
	}
	// 3. Titles and descriptions.
	if size > MaxToolInfoBytes {
		for i := range out {
			out[i].Title, out[i].Description = "", ""
		}
		size = toolInfoSize(out)
	}
	// 4. What remains is names only (already in Tools).
	if size > MaxToolInfoBytes {
		return nil, true
	}
	return out, true
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// validateToolInfo checks metadata coming from outside (POST /agents, the persisted state).
func validateToolInfo(tools []ToolInfo) error {
	var errs []error
	if n := toolInfoSize(tools); len(tools) > 0 && n > MaxToolInfoBytes {
		errs = append(errs, fmt.Errorf("toolInfo: %d bytes encoded, at most %d", n, MaxToolInfoBytes))
	}
	seen := map[string]bool{}
	for _, t := range tools {
		switch {
		case t.Name == "" || len(t.Name) > MaxToolNameLen:
			errs = append(errs, fmt.Errorf("toolInfo: names must be 1-%d characters", MaxToolNameLen))
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("toolInfo: duplicate %q", t.Name))
		}
		seen[t.Name] = true
		if len(t.InputSchema) > 0 && (!json.Valid(t.InputSchema) || bytes.TrimSpace(t.InputSchema)[0] != '{') {
			errs = append(errs, fmt.Errorf("toolInfo %q: inputSchema must be a JSON object", t.Name))
		}
	}
	return errors.Join(errs...)
}

func sameToolInfo(a, b []ToolInfo) bool {
	return slices.EqualFunc(a, b, func(x, y ToolInfo) bool {
		return x.Name == y.Name && x.Title == y.Title && x.Description == y.Description && bytes.Equal(x.InputSchema, y.InputSchema)
	})
}
