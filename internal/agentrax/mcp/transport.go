// Package mcp is the operator's client for an agent's Model Context Protocol endpoint over Streamable HTTP.
//
// It is written on net/http rather than on the official SDK's client because the registry needs control over
// every exchange: which headers go out, how long each request may take, how many bytes a reply may carry, and
// that a session opened for a probe is always ended with DELETE. The SDK is used by the tests as the server.
package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Protocol revisions this client speaks. Modern is the sessionless revision; the legacy ones use initialize.
const (
	VersionModern   = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	// Version20250326 is the first Streamable HTTP revision, still answered by many deployed SDKs. It has no
	// Mcp-Protocol-Version header (that came with 2025-06-18), so none is sent on it.
	Version20250326 = "2025-03-26"
)

// legacyVersions are the initialize-era revisions we accept, preferred first. 2024-11-05 is not among them:
// it predates Streamable HTTP (its transport is HTTP+SSE with a separate POST endpoint).
var legacyVersions = []string{Version20251125, Version20250618, Version20250326}

// versionHeader is the Mcp-Protocol-Version value for a revision; revisions before 2025-06-18 define none.
func versionHeader(v string) string {
	if v == Version20250326 {
		return ""
	}
	return v
}

// JSON-RPC error codes the client looks at.
const (
	CodeMethodNotFound             = -32601
	CodeUnsupportedProtocolVersion = -32022
)

// Header names of the Streamable HTTP transport.
const (
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerSessionID       = "Mcp-Session-Id"
	headerMethod          = "Mcp-Method"
	acceptBoth            = "application/json, text/event-stream"
)

// Keys of the per-request _meta object of the modern revision.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// RPCError is a JSON-RPC error object returned by the server.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error implements error.
func (e *RPCError) Error() string {
	return fmt.Sprintf("mcp: json-rpc error %d: %s", e.Code, e.Message)
}

// HTTPError is a non-2xx HTTP answer. RPC is set when the body was a JSON-RPC error response.
type HTTPError struct {
	Method string
	Status int
	Body   string // first bytes of a non-JSON-RPC body, for messages
	RPC    *RPCError
}

// Error implements error.
func (e *HTTPError) Error() string {
	if e.RPC != nil {
		return fmt.Sprintf("mcp: %s: HTTP %d: %v", e.Method, e.Status, e.RPC)
	}
	return fmt.Sprintf("mcp: %s: HTTP %d: %q", e.Method, e.Status, e.Body)
}

// ErrResponseTooLarge is returned when a reply exceeds Client.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("mcp: response exceeds size limit")

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type rpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

// exchange is one HTTP request of a conversation: the headers that depend on the conversation's state.
type exchange struct {
	// http is the conversation's client: every request of one Discover or Probe goes over one connection
	// (conversation), so a Service balancing connections over several pods cannot split a session.
	http      *http.Client
	endpoint  string
	version   string // Mcp-Protocol-Version header; empty on initialize
	sessionID string
	// modern sends Mcp-Method. (Mcp-Name is defined for calls naming a tool, prompt or resource; discovery
	// never makes one.)
	modern bool
}

// call POSTs one JSON-RPC request and decodes the result into out. The reply may be a JSON body or an SSE
// stream; in a stream, server-to-client requests and notifications are skipped until our response arrives.
// It returns the response headers so initialize can read the session id.
func (c *Client) call(ctx context.Context, x exchange, method string, params, out any) (http.Header, error) {
	id := c.nextID.Add(1)
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	defer cancel()
	resp, err := c.post(ctx, x, method, body)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp, c.drainTimeout())
	limited := &capReader{r: resp.Body, left: c.maxResponseBytes()}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.Header, readHTTPError(method, resp, limited)
	}
	msg, err := readResponse(resp, limited, id)
	if err != nil {
		return resp.Header, fmt.Errorf("mcp: %s: %w", method, err)
	}
	if msg.Error != nil {
		return resp.Header, msg.Error
	}
	if out != nil {
		if err := json.Unmarshal(msg.Result, out); err != nil {
			return resp.Header, fmt.Errorf("mcp: %s: decoding result: %w", method, err)
		}
	}
	return resp.Header, nil
}

// notify POSTs a JSON-RPC notification; the server answers 202 Accepted with no body.
func (c *Client) notify(ctx context.Context, x exchange, method string) error {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout())
	defer cancel()
	resp, err := c.post(ctx, x, method, body)
	if err != nil {
		return err
	}
	defer drainClose(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return readHTTPError(method, resp, &capReader{r: resp.Body, left: c.maxResponseBytes()})
	}
	return nil
}

func (c *Client) post(ctx context.Context, x exchange, method string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", acceptBoth)
	if v := versionHeader(x.version); v != "" {
		req.Header.Set(headerProtocolVersion, v)
	}
	if x.sessionID != "" {
		req.Header.Set(headerSessionID, x.sessionID)
	}
	if x.modern {
		req.Header.Set(headerMethod, method)
	}
	resp, err := x.client(c).Do(req)
	if err != nil {
		return nil, fmt.Errorf("mcp: %s: %w", method, err)
	}
	return resp, nil
}

// deleteSession ends a legacy session. It runs on its own timeout so that a cancelled caller still frees the
// server's session; 404 (already gone) and 405 (server does not allow client termination) are not errors.
func (c *Client) deleteSession(x exchange) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.callTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, x.endpoint, nil)
	if err != nil {
		return err
	}
	req.Header.Set(headerSessionID, x.sessionID)
	if v := versionHeader(x.version); v != "" {
		req.Header.Set(headerProtocolVersion, v)
	}
	resp, err := x.client(c).Do(req)
	if err != nil {
		return fmt.Errorf("mcp: DELETE session: %w", err)
	}
	defer drainClose(resp.Body)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299,
		resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed:
		return nil
	}
	return &HTTPError{Method: "DELETE", Status: resp.StatusCode}
}

func readHTTPError(method string, resp *http.Response, body io.Reader) error {
	data, err := io.ReadAll(body)
	herr := &HTTPError{Method: method, Status: resp.StatusCode}
	if err == nil && isJSON(resp.Header.Get("Content-Type")) {
		var msg rpcMessage
		if json.Unmarshal(data, &msg) == nil && msg.Error != nil {
			herr.RPC = msg.Error
			return herr
		}
	}
	if len(data) > 200 {
		data = data[:200]
	}
	herr.Body = strings.TrimSpace(string(data))
	return herr
}

func readResponse(resp *http.Response, body io.Reader, id int64) (*rpcMessage, error) {
	ct := resp.Header.Get("Content-Type")
	switch {
	case isJSON(ct):
		data, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		var msg rpcMessage
		if err := json.Unmarshal(data, &msg); err != nil {
			return nil, fmt.Errorf("decoding reply: %w", err)
		}
		if !sameID(msg.ID, id) {
			return nil, fmt.Errorf("reply id %s does not match request id %d", msg.ID, id)
		}
		return &msg, nil
	case mediaType(ct) == "text/event-stream":
		return readSSE(body, id)
	}
	return nil, fmt.Errorf("unexpected Content-Type %q", ct)
}

// readSSE reads events until the response to our request id.
func readSSE(body io.Reader, id int64) (*rpcMessage, error) {
	var found *rpcMessage
	err := scanSSE(body, func(data []byte) (bool, error) {
		var msg rpcMessage
		if err := json.Unmarshal(data, &msg); err != nil {
			return false, fmt.Errorf("decoding SSE event: %w", err)
		}
		if msg.Method != "" || !sameID(msg.ID, id) {
			return false, nil // a server request or notification, or another stream's reply
		}
		found = &msg
		return true, nil
	})
	if found != nil || err != nil {
		return found, err
	}
	return nil, errors.New("SSE stream ended without a response")
}

// scanSSE hands the data of each event (its data lines joined with "\n") to onEvent until onEvent reports
// done or fails, or the stream ends (nil). Events without data are skipped.
func scanSSE(body io.Reader, onEvent func(data []byte) (done bool, err error)) error {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	var data []byte
	dispatch := func() (bool, error) {
		if len(data) == 0 {
			return false, nil
		}
		defer func() { data = data[:0] }()
		return onEvent(data)
	}
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if done, err := dispatch(); done || err != nil {
				return err
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		if string(field) == "data" {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, value...)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	_, err := dispatch()
	return err
}

func sameID(raw json.RawMessage, id int64) bool {
	return strings.TrimSpace(string(raw)) == strconv.FormatInt(id, 10)
}

func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

func isJSON(ct string) bool { return mediaType(ct) == "application/json" }

// capReader fails once more than left bytes were read, so a runaway reply is an error, not a silent truncation.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, ErrResponseTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return n, ErrResponseTooLarge
	}
	return n, err
}

// closeBody ends a response. A server ends the SSE stream of a POST once it sent the response; reading it to
// its end hands the connection back for the conversation's next request (closing it unread would drop the
// connection, and a new one may land on another pod). A server that keeps the stream open is given
// drainTimeout, then the stream is closed.
func closeBody(resp *http.Response, drainTimeout time.Duration) {
	if mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" {
		stop := time.AfterFunc(drainTimeout, func() { _ = resp.Body.Close() })
		_, _ = io.CopyN(io.Discard, resp.Body, 1<<20)
		stop.Stop()
		_ = resp.Body.Close()
		return
	}
	drainClose(resp.Body)
}

// client returns the conversation's HTTP client, the Client's own when the exchange has none.
func (x exchange) client(c *Client) *http.Client {
	if x.http != nil {
		return x.http
	}
	return c.httpClient()
}

// drainClose reads a little of what is left so the connection can be reused, then closes the body.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4096)
	_ = body.Close()
}
