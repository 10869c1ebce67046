package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultListenMaxAge bounds one notification stream: a stream older than this is closed and the caller opens
// a new one. It keeps a half-dead connection (a pod gone without a FIN, a proxy holding it) from hiding
// notifications for longer than this, and it moves the stream to another replica now and then.
const DefaultListenMaxAge = 5 * time.Minute

// Methods of the notifications the listener reads.
const (
	methodToolsListChanged         = "notifications/tools/list_changed"
	methodSubscriptionAcknowledged = "notifications/subscriptions/acknowledged"
)

// ErrListChangedNotOffered is returned by ListenToolChanges when the server does not announce
// capabilities.tools.listChanged (or does not acknowledge the subscription): only polling finds its changes.
var ErrListChangedNotOffered = errors.New("mcp: the server does not offer notifications/tools/list_changed")

// ListenToolChanges holds one stream on which the server sends notifications/tools/list_changed and calls
// changed for each one. It returns nil when the stream ends — closed by the server, or maxAge
// (DefaultListenMaxAge when zero) passed — and the caller opens a new one; ctx ending also returns nil.
//
// Like Discover, it is one conversation over one connection (a Service balancing connections cannot split the
// session). On a legacy revision it is initialize, notifications/initialized and the session's GET stream,
// with the session DELETEd at the end; on the sessionless revision it is server/discover and a
// subscriptions/listen request whose reply stream stays open. Each event is capped at MaxResponseBytes.
func (c *Client) ListenToolChanges(ctx context.Context, endpoint string, maxAge time.Duration, changed func()) error {
	if maxAge <= 0 {
		maxAge = DefaultListenMaxAge
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, maxAge)
	defer cancel()
	hc, done := c.conversation()
	defer done()
	legacyVersion, res, err := c.tryModern(ctx, hc, endpoint)
	switch {
	case err != nil:
		return endOfStream(parent, err)
	case res != nil && !res.ToolsListChanged:
		return ErrListChangedNotOffered
	case res != nil:
		x := exchange{http: hc, endpoint: endpoint, version: VersionModern, modern: true}
		return endOfStream(parent, c.listenModern(ctx, x, changed))
	}
	err = c.withSession(ctx, hc, endpoint, legacyVersion, func(x exchange, r *Result) error {
		if !r.ToolsListChanged {
			return ErrListChangedNotOffered
		}
		return c.listenLegacy(ctx, x, changed)
	})
	return endOfStream(parent, err)
}

// endOfStream turns the end of a stream by its own deadline or by the caller into nil: both are normal ends.
func endOfStream(parent context.Context, err error) error {
	if err == nil || errors.Is(err, ErrListChangedNotOffered) {
		return err
	}
	if parent.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// listenLegacy opens the session's GET stream, where a legacy server sends what is not the reply to a request.
func (c *Client) listenLegacy(ctx context.Context, x exchange, changed func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, x.endpoint, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, x.sessionID)
	if v := versionHeader(x.version); v != "" {
		req.Header.Set(headerProtocolVersion, v)
	}
	resp, err := x.client(c).Do(req)
	if err != nil {
		return fmt.Errorf("mcp: GET stream: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusMethodNotAllowed {
		// The transport allows a server to offer no GET stream; it then has nowhere to send the notification.
		return ErrListChangedNotOffered
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readHTTPError("GET stream", resp, &capReader{r: resp.Body, left: c.maxResponseBytes()})
	}
	if mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		return fmt.Errorf("mcp: GET stream: unexpected Content-Type %q", resp.Header.Get("Content-Type"))
	}
	return c.readNotifications(resp.Body, changed, nil)
}

// listenModern sends subscriptions/listen for tool list changes; the reply is a stream that stays open, whose
// first event acknowledges what the server will send.
func (c *Client) listenModern(ctx context.Context, x exchange, changed func()) error {
	id := c.nextID.Add(1)
	params := map[string]any{"_meta": c.meta(), "notifications": map[string]any{"toolsListChanged": true}}
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: &id, Method: "subscriptions/listen", Params: params})
	if err != nil {
		return err
	}
	resp, err := c.post(ctx, x, "subscriptions/listen", body)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readHTTPError("subscriptions/listen", resp, &capReader{r: resp.Body, left: c.maxResponseBytes()})
	}
	if mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		// A JSON reply is the end of the subscription (or an error), not a stream.
		msg, err := readResponse(resp, &capReader{r: resp.Body, left: c.maxResponseBytes()}, id)
		if err == nil && msg.Error != nil {
			err = msg.Error
		}
		return err
	}
	return c.readNotifications(resp.Body, changed, acknowledgedToolsListChanged)
}

// acknowledgedToolsListChanged checks the params of notifications/subscriptions/acknowledged: the server
// agreed to send tool list changes.
func acknowledgedToolsListChanged(params json.RawMessage) error {
	var p struct {
		Notifications struct {
			ToolsListChanged bool `json:"toolsListChanged"`
		} `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil || !p.Notifications.ToolsListChanged {
		return ErrListChangedNotOffered
	}
	return nil
}

// readNotifications calls changed for each notifications/tools/list_changed on the stream, and acknowledged
// (when set) for the subscription's acknowledgement. Anything else (other notifications, the reply that ends a
// subscription, server requests the registry does not answer) is skipped.
func (c *Client) readNotifications(body io.Reader, changed func(), acknowledged func(json.RawMessage) error) error {
	limit := c.maxResponseBytes()
	return scanSSE(body, func(data []byte) (bool, error) {
		if int64(len(data)) > limit {
			return false, ErrResponseTooLarge
		}
		method, params, err := notification(data)
		if err != nil {
			return false, err
		}
		switch method {
		case methodToolsListChanged:
			changed()
		case methodSubscriptionAcknowledged:
			if acknowledged != nil {
				return false, acknowledged(params)
			}
		}
		return false, nil
	})
}

// notification decodes one stream event: its method ("" for a reply) and params.
func notification(data []byte) (string, json.RawMessage, error) {
	var msg struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(data, &msg); err != nil {
		return "", nil, fmt.Errorf("mcp: decoding stream event: %w", err)
	}
	return msg.Method, msg.Params, nil
}
