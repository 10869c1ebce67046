// Command netprobe is the test workload of the real-node suite, run as a pod from an image built offline: it
// answers a readiness probe, reports the user it runs as and whether its root filesystem is writable, fetches
// a URL from inside its pod so the suite can test traffic between pods (NetworkPolicies apply to pods, not to the
// node the test runs on), and calls the API server with its service-account credentials as an in-cluster client
// does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
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
	var servers []*http.Server
	errs := make(chan error, 8)
	for _, addr := range strings.Split(*listen, ",") {
		s := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
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
