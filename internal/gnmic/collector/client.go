// Package collector talks to gNMIc collectors (v0.45 collector mode) over their REST API: it pushes plans with
// POST /api/v1/config/apply, reads target state with GET /api/v1/targets, and follows
// /api/v1/sse/targets?store=state. Monitor keeps one stream and one poller per collector pod.
package collector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// TargetState is gNMIc's per-target runtime state.
type TargetState struct {
	IntendedState   string            `json:"intended-state,omitempty"`
	State           string            `json:"state,omitempty"`
	FailedReason    string            `json:"failed-reason,omitempty"`
	LastUpdated     time.Time         `json:"last-updated"`
	ConnectionState string            `json:"connection-state,omitempty"`
	Subscriptions   map[string]string `json:"subscriptions,omitempty"`
}

// targetResponse is one element of GET /api/v1/targets.
type targetResponse struct {
	Name  string       `json:"name"`
	State *TargetState `json:"state,omitempty"`
}

// Event is one server-sent event of /api/v1/sse/{kind}.
type Event struct {
	Store     string          `json:"store"`
	Kind      string          `json:"kind"`
	Name      string          `json:"name"`
	EventType string          `json:"event-type"`
	Object    json.RawMessage `json:"object"`
}

// Client calls collectors. The zero value uses http.DefaultClient for http URLs; https URLs need Trust first.
type Client struct {
	HTTP *http.Client
	// PreviousCAWindow bounds how long a rotated-away CA stays trusted (DefaultPreviousCAWindow when zero).
	PreviousCAWindow time.Duration
	// Now is the clock the rotation window is measured with (time.Now when nil); tests set it.
	Now func() time.Time

	trust trust
}

// DefaultPreviousCAWindow is how long a CA replaced by a rotation stays trusted for collectors that still serve a
// certificate of it. It covers a StatefulSet roll with room to spare; past it a collector still on the old files
// (or anything else presenting an old-CA certificate) is refused, so the rotation of a compromised CA takes full
// effect within a bounded time.
const DefaultPreviousCAWindow = time.Hour

func (c *Client) previousCAWindow() time.Duration {
	if c.PreviousCAWindow > 0 {
		return c.PreviousCAWindow
	}
	return DefaultPreviousCAWindow
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Apply posts a full configuration to the collector at baseURL.
func (c *Client) Apply(ctx context.Context, baseURL string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(baseURL, "/")+"/api/v1/config/apply", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	hc, err := c.clientFor(baseURL)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("apply to %s: HTTP %d: %s", baseURL, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// Config returns the collector's whole configuration (GET /api/v1/config, at most 16 MiB) as it answers it. It
// holds device passwords in clear, which is why the API takes only the operator's client certificate; the
// operator does not call it itself: it is for diagnosis and for the checks against the real collector.
func (c *Client) Config(ctx context.Context, baseURL string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/api/v1/config", nil)
	if err != nil {
		return nil, err
	}
	hc, err := c.clientFor(baseURL)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/api/v1/config: HTTP %d", baseURL, resp.StatusCode)
	}
	return body, nil
}

// Targets returns the runtime state of every target the collector holds, by name.
func (c *Client) Targets(ctx context.Context, baseURL string) (map[string]TargetState, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/api/v1/targets", nil)
	if err != nil {
		return nil, err
	}
	hc, err := c.clientFor(baseURL)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/api/v1/targets: HTTP %d", baseURL, resp.StatusCode)
	}
	var list []targetResponse
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decoding targets from %s: %w", baseURL, err)
	}
	out := make(map[string]TargetState, len(list))
	for _, t := range list {
		if t.State != nil {
			out[t.Name] = *t.State
		} else {
			out[t.Name] = TargetState{}
		}
	}
	return out, nil
}

// Watch follows /api/v1/sse/targets?store=state, calling connected once the stream is open and onEvent for
// every event, until the stream ends or ctx is done. It always returns a non-nil error.
func (c *Client) Watch(ctx context.Context, baseURL string, connected func(), onEvent func(Event)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/api/v1/sse/targets?store=state", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	hc, err := c.clientFor(baseURL)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("SSE %s: HTTP %d", baseURL, resp.StatusCode)
	}
	connected()
	return ReadEvents(resp.Body, onEvent)
}

// ReadEvents parses a text/event-stream, calling onEvent for each event whose data is an Event. Comment lines and
// events with other data are skipped. It returns io.ErrUnexpectedEOF when the stream ends.
func ReadEvents(r io.Reader, onEvent func(Event)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 {
				var ev Event
				if err := json.Unmarshal([]byte(data.String()), &ev); err == nil {
					onEvent(ev)
				}
				data.Reset()
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
