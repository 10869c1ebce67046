package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultListenMaxAge bounds one notification stream: a stream older than this is closed and the caller opens
// a new one. It keeps a half-dead connection (a pod gone without a FIN, a proxy holding it) from hiding
// notifications for longer than this, and it moves the stream to another replica now and then.
const DefaultListenMaxAge = 5 * time.Minute

// ErrListChangedNotOffered is returned by ListenToolChanges when the server does not announce
// capabilities.tools.listChanged (or offers no stream to send it on): only polling finds its changes.
var ErrListChangedNotOffered = errors.New("mcp: the server does not offer notifications/tools/list_changed")

// ListenToolChanges holds one stream on which the server sends notifications/tools/list_changed and calls
// changed for each one. It returns nil when the stream ends — closed by the server, or maxAge
// (DefaultListenMaxAge when zero) passed — and the caller opens a new one; ctx ending also returns nil.
//
// Like Discover, it is one conversation over one connection (a Service balancing connections cannot split the
// session). On a legacy revision it is initialize, notifications/initialized and the session's GET stream, with
// the session DELETEd at the end; on the sessionless revision it is server/discover and a subscriptions/listen
// request whose reply stream stays open (the SDK sends both). Each event is capped at MaxResponseBytes.
func (c *Client) ListenToolChanges(ctx context.Context, endpoint string, maxAge time.Duration, changed func()) error {
	if maxAge <= 0 {
		maxAge = DefaultListenMaxAge
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, maxAge)
	defer cancel()
	hc, caps, done := c.oneConnection()
	defer done()
	stream := &heldStream{next: hc.Transport}
	hc.Transport = stream
	opts := &sdk.ClientOptions{ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed() }}
	v := &convo{c: c, caps: caps}
	defer v.end()
	cs, res, err := v.connect(ctx, endpoint, hc, opts, false)
	if err != nil {
		stream.abort()
		return endOfStream(parent, caps.explain(err))
	}
	if !res.ToolsListChanged {
		stream.abort()
		_ = c.close(cs, caps)
		return ErrListChangedNotOffered
	}
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	select {
	case <-ctx.Done():
		err = nil
	case err = <-ended:
	}
	// The stream goes first: it holds the conversation's one connection, which the DELETE then needs.
	stream.abort()
	_ = c.close(cs, caps)
	if stream.notOffered.Load() {
		return ErrListChangedNotOffered
	}
	return endOfStream(parent, caps.explain(err))
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

// heldStream keeps a legacy conversation on one connection. The SDK opens the session's GET stream as soon as
// initialize is answered, before it sends notifications/initialized; on a single connection that POST would wait
// for the stream for ever. So the GET is answered at once with a stream of our own, and the real GET is sent
// once notifications/initialized went through, on the same connection, its events copied into that stream.
type heldStream struct {
	next http.RoundTripper

	mu          sync.Mutex
	initialized chan struct{}
	cancels     []context.CancelFunc
	// notOffered is set when the server refuses the GET stream (405: the transport allows a server without one).
	notOffered atomic.Bool
}

func (h *heldStream) initializedCh() chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.initialized == nil {
		h.initialized = make(chan struct{})
	}
	return h.initialized
}

func (h *heldStream) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet {
		return h.deferGET(req), nil
	}
	isInitialized := false
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		isInitialized = bytes.Contains(body, []byte(`"notifications/initialized"`))
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := h.next.RoundTrip(req)
	if isInitialized {
		ch := h.initializedCh()
		h.mu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		h.mu.Unlock()
	}
	return resp, err
}

// deferGET answers the GET with a pipe and sends it for real once the session is initialized.
func (h *heldStream) deferGET(req *http.Request) *http.Response {
	ctx, cancel := context.WithCancel(req.Context())
	h.mu.Lock()
	h.cancels = append(h.cancels, cancel)
	h.mu.Unlock()
	pr, pw := io.Pipe()
	go func() {
		select {
		case <-h.initializedCh():
		case <-ctx.Done():
			_ = pw.CloseWithError(ctx.Err())
			return
		}
		resp, err := h.next.RoundTrip(req.Clone(ctx))
		if err != nil {
			_ = pw.CloseWithError(err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode == http.StatusMethodNotAllowed {
			h.notOffered.Store(true)
			_ = pw.CloseWithError(ErrListChangedNotOffered)
			return
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			_ = pw.CloseWithError(fmt.Errorf("mcp: GET stream: HTTP %d", resp.StatusCode))
			return
		}
		_, err = io.Copy(pw, resp.Body)
		_ = pw.CloseWithError(err)
	}()
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: req}
}

// abort ends every GET stream, real or still waiting, freeing the connection.
func (h *heldStream) abort() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cancel := range h.cancels {
		cancel()
	}
	h.cancels = nil
}
