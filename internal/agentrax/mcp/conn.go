package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ErrResponseTooLarge is returned when a reply (a JSON body, or one SSE event) exceeds Client.MaxResponseBytes.
var ErrResponseTooLarge = errors.New("mcp: response exceeds size limit")

// limits is the RoundTripper of one conversation: it caps what each reply may carry and remembers a cap that was
// hit, so the error the SDK makes of a cut reply can be reported as ErrResponseTooLarge.
type limits struct {
	next     http.RoundTripper
	max      int64
	exceeded atomic.Bool
	// drain is how long a POST's SSE stream may stay open after it carried the reply (DefaultDrainTimeout).
	drain time.Duration

	mu    sync.Mutex
	conns []net.Conn
	// refusing fails new connections while an exchange that ran out of time unwinds (see refuse).
	refusing bool
}

// errRefused is what a connection attempt gets while an exchange that ran out of time unwinds.
var errRefused = errors.New("mcp: the exchange ran out of time")

// dialer wraps dial so that abort can close what it opened.
func (l *limits) dialer(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		l.mu.Lock()
		refusing := l.refusing
		l.mu.Unlock()
		if refusing {
			return nil, errRefused
		}
		conn, err := dial(ctx, network, addr)
		if err == nil {
			l.mu.Lock()
			l.conns = append(l.conns, conn)
			l.mu.Unlock()
		}
		return conn, err
	}
}

// abort closes the conversation's connections. After an exchange timed out its request may still hold the one
// connection (the SDK reads reply streams on its own context), and the session's DELETE would wait behind it.
func (l *limits) abort() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, conn := range l.conns {
		_ = conn.Close()
	}
	l.conns = nil
}

// refuse aborts and fails every new connection until allow: an exchange past its deadline may still try the
// next step of the handshake (initialize after server/discover) on a new connection, which must not wait too.
func (l *limits) refuse() {
	l.abort()
	l.mu.Lock()
	l.refusing = true
	l.mu.Unlock()
}

// allow lets connections be opened again once the exchange returned (the session's DELETE needs one).
func (l *limits) allow() {
	l.mu.Lock()
	l.refusing = false
	l.mu.Unlock()
}

func (l *limits) RoundTrip(req *http.Request) (*http.Response, error) {
	var id json.RawMessage
	if req.Method == http.MethodPost && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		if json.Unmarshal(body, &msg) == nil {
			id = msg.ID
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &capReader{body: resp.Body, left: l.max, max: l.max, perEvent: ct == "text/event-stream", hit: &l.exceeded,
		replyTo: id, drain: l.drain}
	return resp, nil
}

// explain names a hit cap in err (the SDK reports a cut reply in words of its own).
func (l *limits) explain(err error) error {
	if err != nil && l.exceeded.Load() && !errors.Is(err, ErrResponseTooLarge) {
		return fmt.Errorf("%w: %w", ErrResponseTooLarge, err)
	}
	return err
}

// capReader fails with ErrResponseTooLarge once more than max bytes were read: in all, or, on an SSE stream
// (perEvent), since the last blank line, so a long-lived notification stream is bounded per event, not in total.
// On the SSE stream of a request (replyTo, its JSON-RPC id) it also watches for the reply: a server may keep the
// stream open after it, and the SDK reads a stream to its end before the connection serves the next request, so
// drain after the reply the stream ends (EOF, the connection closed).
type capReader struct {
	body     io.ReadCloser
	left     int64
	max      int64
	perEvent bool
	// newline is true after a line feed (carriage returns aside): a second one ends the event.
	newline bool
	hit     *atomic.Bool

	replyTo json.RawMessage
	drain   time.Duration
	event   []byte
	timer   *time.Timer
	drained atomic.Bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.drained.Load() {
		return 0, io.EOF
	}
	n, err := c.body.Read(p)
	if c.drained.Load() {
		return 0, io.EOF
	}
	for i := range n {
		b := p[i]
		if c.watching() {
			c.event = append(c.event, b)
		}
		switch {
		case b == '\n' && c.newline && c.perEvent:
			c.left, c.newline = c.max, false
			c.endOfEvent()
			continue
		case b == '\n':
			c.newline = true
		case b != '\r':
			c.newline = false
		}
		if c.left--; c.left < 0 {
			c.hit.Store(true)
			return i, ErrResponseTooLarge
		}
	}
	return n, err
}

func (c *capReader) watching() bool { return c.perEvent && len(c.replyTo) > 0 && c.timer == nil }

// endOfEvent starts the drain deadline when the event just ended is the reply to the request.
func (c *capReader) endOfEvent() {
	if !c.watching() {
		return
	}
	event := c.event
	c.event = c.event[:0]
	var data []byte
	for line := range bytes.SplitSeq(event, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:")); ok {
			data = append(append(data, bytes.TrimPrefix(rest, []byte(" "))...), '\n')
		}
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &msg) != nil || !bytes.Equal(msg.ID, c.replyTo) || (msg.Result == nil && msg.Error == nil) {
		return
	}
	c.timer = time.AfterFunc(c.drain, func() {
		c.drained.Store(true)
		_ = c.body.Close()
	})
}

func (c *capReader) Close() error {
	if c.timer != nil {
		c.timer.Stop()
	}
	return c.body.Close()
}

// oneConnection is the HTTP client of one conversation: a clone of the Client's transport allowed a single
// connection, behind the reply caps. done closes that connection. A custom RoundTripper (not an *http.Transport)
// is used as it is, with the caps.
func (c *Client) oneConnection() (*http.Client, *limits, func()) {
	base := c.HTTP
	if base == nil {
		base = http.DefaultClient
	}
	l := &limits{max: c.maxResponseBytes(), drain: c.drainTimeout()}
	hc := *base
	hc.Transport = l
	// Each exchange is bounded by its context (CallTimeout); a client-wide Timeout would also cut the
	// notification stream of a listener.
	hc.Timeout = 0
	var t *http.Transport
	switch rt := base.Transport.(type) {
	case nil:
		t = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		l.next = rt
		return &hc, l, func() {}
	}
	t.MaxConnsPerHost, t.MaxIdleConnsPerHost, t.DisableKeepAlives = 1, 1, false
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = l.dialer(dial)
	l.next = t
	return &hc, l, t.CloseIdleConnections
}
