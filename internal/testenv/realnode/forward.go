package realnode

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
)

// apiForwarder makes the API server reachable from pods: it accepts connections on the bridge address at the API
// server's port and joins each to the API server's loopback listener. The API server itself keeps listening on
// 127.0.0.1 only, and the bridge has no route off the machine, so nothing beyond it can connect. kube-proxy
// translates the `kubernetes` Service (whose endpoint the API server publishes as GatewayIP:<port>) to it.
type apiForwarder struct {
	listener net.Listener
	target   string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// forwardAPIServer listens on ip at the port of apiServerURL (https://127.0.0.1:<port>) and forwards to it.
func forwardAPIServer(ip, apiServerURL string) (*apiForwarder, error) {
	u, err := url.Parse(apiServerURL)
	if err != nil {
		return nil, fmt.Errorf("the API server's URL %q: %w", apiServerURL, err)
	}
	if host := u.Hostname(); host != "127.0.0.1" && host != "localhost" {
		return nil, fmt.Errorf("the API server listens on %s, not on the loopback address the forwarder expects", host)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, u.Port()))
	if err != nil {
		return nil, fmt.Errorf("forwarding the API server to pods: %w", err)
	}
	f := &apiForwarder{listener: l, target: u.Host, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *apiForwarder) serve() {
	defer f.wg.Done()
	for {
		conn, err := f.listener.Accept()
		if err != nil {
			return // closed by stop
		}
		if !f.track(conn) {
			_ = conn.Close()
			return
		}
		f.wg.Add(1)
		go f.pipe(conn)
	}
}

// track records an open connection so stop can close it; false once stopping.
func (f *apiForwarder) track(conn net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[conn] = struct{}{}
	return true
}

func (f *apiForwarder) untrack(conn net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.conns, conn)
}

// pipe copies both ways between the pod's connection and a new one to the API server until either side closes.
func (f *apiForwarder) pipe(in net.Conn) {
	defer f.wg.Done()
	defer f.untrack(in)
	defer func() { _ = in.Close() }()
	out, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	if !f.track(out) {
		_ = out.Close()
		return
	}
	defer f.untrack(out)
	defer func() { _ = out.Close() }()
	done := make(chan struct{}, 2)
	copyHalf := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close so the other direction can still finish (TLS close_notify, a streamed watch's end).
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}
	go copyHalf(out, in)
	go copyHalf(in, out)
	<-done
	<-done
}

// stop closes the listener and every forwarded connection, and waits until all copying has ended.
func (f *apiForwarder) stop() error {
	f.mu.Lock()
	f.closed = true
	err := f.listener.Close()
	for conn := range f.conns {
		_ = conn.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
