// Command netprobe is the test workload of the real-node suite, run as a pod from an image built offline: it
// answers a readiness probe (HTTP GET /healthz, or gRPC health on the same ports, so it can stand in for a gRPC
// server whose pods the kubelet probes with gRPC), reports the user it runs as and whether its root filesystem is
// writable, fetches a URL from inside its pod so the suite can test traffic between pods (NetworkPolicies apply to
// pods, not to the node the test runs on), calls the API server with its service-account credentials as an
// in-cluster client does, and resolves names with the pod's DNS configuration. For UDP it echoes datagrams on the
// --udp addresses, and /udp sends one from inside the pod and waits for the echo.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// fetchClient opens a new connection for every fetch: a kept-alive connection made before a NetworkPolicy existed
// stays established, and firewalls (rightly) let established connections through, which would hide the policy.
var fetchClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// Identity is what /whoami answers.
type Identity struct {
	UID, GID     int
	Hostname     string
	RootWritable bool
	WriteError   string
}

func main() {
	listen := flag.String("listen", ":8080", "comma-separated addresses to serve on")
	udp := flag.String("udp", "", "comma-separated UDP addresses to echo datagrams on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/whoami", func(w http.ResponseWriter, _ *http.Request) {
		host, _ := os.Hostname()
		id := Identity{UID: os.Getuid(), GID: os.Getgid(), Hostname: host}
		if err := os.WriteFile("/netprobe-write-test", []byte("x"), 0o600); err != nil {
			id.WriteError = err.Error()
		} else {
			id.RootWritable = true
			_ = os.Remove("/netprobe-write-test")
		}
		_ = json.NewEncoder(w).Encode(id)
	})
	// /fetch?url=… GETs the URL from inside this pod: 200 with the body, or 502 with the error.
	mux.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		target := r.URL.Query().Get("url")
		if !strings.HasPrefix(target, "http://") {
			http.Error(w, "url must be http://", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
		if err == nil {
			var resp *http.Response
			if resp, err = fetchClient.Do(req); err == nil {
				defer func() { _ = resp.Body.Close() }()
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
				w.WriteHeader(resp.StatusCode)
				_, _ = w.Write(body)
				return
			}
		}
		http.Error(w, err.Error(), http.StatusBadGateway)
	})
	mux.HandleFunc("/apiserver", apiServerHandler)
	mux.HandleFunc("/resolve", resolveHandler)
	// /udp?addr=host:port sends a datagram from inside this pod: 200 with the echo, or 502 when none came back.
	mux.HandleFunc("/udp", func(w http.ResponseWriter, r *http.Request) {
		echo, err := udpRoundTrip(r.URL.Query().Get("addr"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = w.Write(echo)
	})
	// gRPC health (every service SERVING) on every listener, beside the HTTP/1.1 handlers: the kubelet's gRPC
	// probe speaks HTTP/2 without TLS (prior knowledge), which the servers accept.
	grpcServer := grpc.NewServer()
	healthpb.RegisterHealthServer(grpcServer, health.NewServer())
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			grpcServer.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	var servers []*http.Server
	errs := make(chan error, 8)
	if *udp != "" {
		for _, addr := range strings.Split(*udp, ",") {
			conn, err := net.ListenPacket("udp", addr)
			if err != nil {
				log.Fatal(err)
			}
			// Closed with the process.
			go echoUDP(conn)
		}
	}
	for _, addr := range strings.Split(*listen, ",") {
		s := &http.Server{Addr: addr, Handler: handler, Protocols: &protocols, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, s)
		go func() { errs <- s.ListenAndServe() }()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
	case err := <-errs:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(ctx)
	}
	fmt.Println("netprobe stopped")
}

// echoUDP sends every datagram back to its sender until conn is closed.
func echoUDP(conn net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = conn.WriteTo(buf[:n], from)
	}
}

// udpRoundTrip sends one datagram to addr from a new socket (a new source port, so no firewall state of an earlier
// exchange applies) and returns the echo, or an error when none comes back within a second.
func udpRoundTrip(addr string) ([]byte, error) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("netprobe")); err != nil {
		return nil, err
	}
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("no echo from %s: %w", addr, err)
	}
	return buf[:n], nil
}
