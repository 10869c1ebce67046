// Package gnmicserver is a stand-in for one gNMIc collector (collector mode, 0.45–0.47) speaking its REST protocol
// as gNMIc implements it (pkg/collector/api/server): POST /api/v1/config/apply (a full declarative replace),
// /api/v1/config/targets[/{name}], /api/v1/config/subscriptions, /api/v1/targets[/{name}],
// /api/v1/sse/{kind}?store=config|state|all and /api/v1/healthz. Bodies are decoded the way gNMIc decodes them
// (decode.go: JSON into a map, then mapstructure into gNMIc's config types), so a payload that gNMIc would refuse
// or silently misread is refused or misread here too; keys gNMIc would drop are kept in Unused so tests can fail
// on them. It records every apply and can inject faults: down, slow, 5xx and dropped SSE streams. Tests and `make dev` run it on loopback; it never dials a device, it reports every target it holds
// as running with a READY connection (or whatever ConnectionState says).
package gnmicserver

import (
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openconfig/gnmic/pkg/api/types"
)

// TargetState is gNMIc's per-target state-store entry.
type TargetState struct {
	IntendedState   string            `json:"intended-state"`
	State           string            `json:"state"`
	FailedReason    string            `json:"failed-reason,omitempty"`
	LastUpdated     time.Time         `json:"last-updated"`
	ConnectionState string            `json:"connection-state,omitempty"`
	Subscriptions   map[string]string `json:"subscriptions,omitempty"`
}

// TargetResponse is one element of GET /api/v1/targets.
type TargetResponse struct {
	Name   string              `json:"name"`
	Config *types.TargetConfig `json:"config"`
	State  *TargetState        `json:"state,omitempty"`
}

// SSEEvent is the data of one server-sent event.
type SSEEvent struct {
	Timestamp time.Time `json:"timestamp"`
	Store     string    `json:"store"`
	Kind      string    `json:"kind"`
	Name      string    `json:"name"`
	EventType string    `json:"event-type"`
	Object    any       `json:"object"`
}

type apiErrors struct {
	Errors []string `json:"errors,omitempty"`
}

// Fault is injected into every request while set.
type Fault struct {
	// Down closes every connection without a response, as a crashed collector would.
	Down bool
	// Delay holds every request this long first.
	Delay time.Duration
	// Status, when non-zero, answers every request except SSE streams with this status and an errors body.
	Status int
}

type subscriber struct {
	store string
	ch    chan SSEEvent
	done  chan struct{}
}

// Server is one fake collector.
type Server struct {
	// ConnectionState, when set, decides the reported connection state of a target (default READY).
	ConnectionState func(cfg *types.TargetConfig) string
	// Version is the collector version whose decoder the stand-in reproduces (DefaultVersion when empty). Set it
	// before the first request.
	Version string

	mu          sync.Mutex
	config      ApplyRequest
	states      map[string]*TargetState
	fault       Fault
	applies     []ApplyRequest
	unused      []string
	pluginErrs  []string
	subscribers map[*subscriber]bool

	listener net.Listener
	srv      *http.Server
	scheme   string
	// tls is what the server presents and asks for over TLS; conns the open connections, closed by Restart.
	tls   atomic.Pointer[tls.Config]
	conns sync.Map
}

// Start listens on addr (e.g. 127.0.0.1:0) and serves until Close.
func Start(addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{listener: l, states: map[string]*TargetState{}, subscribers: map[*subscriber]bool{}, scheme: "http"}
	s.config = emptyConfig()
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// StartTLS is Start serving HTTPS with a PEM certificate and key, as a collector with api-server.tls
// cert-file/key-file does (no client certificate asked for).
func StartTLS(addr string, certPEM, keyPEM []byte) (*Server, error) {
	return StartMutualTLS(addr, certPEM, keyPEM, nil)
}

// StartMutualTLS is StartTLS that, with clientCAPEM, refuses at the handshake every client without a
// certificate of that CA, as a collector with api-server.tls ca-file and client-auth: require-verify does.
func StartMutualTLS(addr string, certPEM, keyPEM, clientCAPEM []byte) (*Server, error) {
	s, err := StartTLSPending(addr)
	if err != nil {
		return nil, err
	}
	if err := s.Restart(certPEM, keyPEM, clientCAPEM); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// StartTLSPending serves HTTPS without a certificate yet: every handshake fails until Restart gives it one, as
// a collector pod whose certificate Secret is not issued yet never starts.
func StartTLSPending(addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{listener: l, states: map[string]*TargetState{}, subscribers: map[*subscriber]bool{}, scheme: "https"}
	s.config = emptyConfig()
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cfg := s.tls.Load()
			if cfg == nil {
				return nil, errors.New("no certificate yet")
			}
			return cfg, nil
		}},
		ConnState: s.trackConn}
	go func() { _ = s.srv.ServeTLS(l, "", "") }()
	return s, nil
}

// Restart serves a new certificate (and, with clientCAPEM, requires client certificates of that CA), as a
// collector pod restarted with new certificate files does (gNMIc reads them once at start): every connection and
// stream is closed, so clients handshake again. The configuration is kept (the operator pushes it again anyway).
func (s *Server) Restart(certPEM, keyPEM, clientCAPEM []byte) error {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if clientCAPEM != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(clientCAPEM) {
			return errors.New("the client CA holds no PEM certificate")
		}
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, pool
	}
	s.tls.Store(cfg)
	s.DropStreams()
	s.conns.Range(func(c, _ any) bool {
		_ = c.(net.Conn).Close()
		return true
	})
	return nil
}

func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		s.conns.Store(c, true)
	case http.StateClosed, http.StateHijacked:
		s.conns.Delete(c)
	}
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234 (https for StartTLS).
func (s *Server) URL() string { return s.scheme + "://" + s.listener.Addr().String() }

// Close stops the server and ends every stream.
func (s *Server) Close() error {
	s.DropStreams()
	return s.srv.Close()
}

func emptyConfig() ApplyRequest {
	return ApplyRequest{Targets: map[string]*types.TargetConfig{}, Subscriptions: map[string]*types.SubscriptionConfig{},
		Outputs: map[string]map[string]any{}, Inputs: map[string]map[string]any{}, Processors: map[string]map[string]any{},
		TunnelTargetMatches: map[string]*TunnelTargetMatch{}}
}

// SetFault replaces the injected fault; Fault{} clears it.
func (s *Server) SetFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// Wipe forgets the whole configuration without closing any stream, as a collector that restarted empty while
// the operator's stream was reconnected unnoticed; the state store publishes the deletions.
func (s *Server) Wipe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = emptyConfig()
	s.syncStatesLocked()
}

// DropStreams ends every open SSE stream, as a collector restart or a broken connection would.
func (s *Server) DropStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sub := range s.subscribers {
		close(sub.done)
		delete(s.subscribers, sub)
	}
}

// Streams is how many SSE streams are open.
func (s *Server) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subscribers)
}

// TargetNames returns the names of the targets the collector holds, sorted.
func (s *Server) TargetNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.config.Targets))
}

// Config returns the collector's current configuration.
func (s *Server) Config() ApplyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config
}

// Applies returns every accepted apply request, oldest first.
func (s *Server) Applies() []ApplyRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applies)
}

// ApplyCount is how many apply requests were accepted.
func (s *Server) ApplyCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.applies)
}

// Unused returns every body key a gNMIc collector would have silently dropped, over all accepted requests, in
// the order first seen.
func (s *Server) Unused() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unused)
}

// PluginErrors returns every output or processor config a plugin of the collector refused, over all accepted
// requests, in the order first seen (Decoded.PluginErrors).
func (s *Server) PluginErrors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.pluginErrs)
}

// SetTargetState overrides the reported state of one target and publishes it to state streams.
func (s *Server) SetTargetState(name, state, connectionState, failedReason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts, ok := s.states[name]
	if !ok {
		return
	}
	ts.State, ts.ConnectionState, ts.FailedReason, ts.LastUpdated = state, connectionState, failedReason, time.Now().UTC()
	s.publishLocked("state", name, "update", cloneState(ts))
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	mux.HandleFunc("POST /api/v1/config/apply", s.handleApply)
	mux.HandleFunc("GET /api/v1/config", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Config()) })
	mux.HandleFunc("GET /api/v1/config/targets", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Config().Targets)
	})
	mux.HandleFunc("GET /api/v1/config/targets/{id}", func(w http.ResponseWriter, r *http.Request) {
		cfg, ok := s.Config().Targets[r.PathValue("id")]
		if !ok {
			writeErrors(w, http.StatusNotFound, fmt.Sprintf("target %s not found", r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, cfg)
	})
	mux.HandleFunc("POST /api/v1/config/targets", s.handleTargetPost)
	mux.HandleFunc("DELETE /api/v1/config/targets/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.config.Targets, r.PathValue("id"))
		s.syncStatesLocked()
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /api/v1/config/subscriptions", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Config().Subscriptions)
	})
	mux.HandleFunc("GET /api/v1/config/outputs", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Config().Outputs)
	})
	mux.HandleFunc("GET /api/v1/targets", s.handleTargets)
	mux.HandleFunc("GET /api/v1/targets/{id}", s.handleTargets)
	mux.HandleFunc("GET /api/v1/sse/{kind}", s.handleSSE)
	return s.withFaults(mux)
}

func (s *Server) withFaults(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f := s.fault
		s.mu.Unlock()
		if f.Delay > 0 {
			select {
			case <-time.After(f.Delay):
			case <-r.Context().Done():
				return
			}
		}
		if f.Down {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			writeErrors(w, http.StatusServiceUnavailable, "down")
			return
		}
		if f.Status != 0 && !strings.HasPrefix(r.URL.Path, "/api/v1/sse/") {
			writeErrors(w, f.Status, "injected failure")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readBody returns the request body, gunzipped when the client says so, as gNMIc reads it.
func readBody(r *http.Request) (io.Reader, func(), error) {
	if r.Header.Get("Content-Encoding") != "gzip" {
		return r.Body, func() {}, nil
	}
	gz, err := gzip.NewReader(r.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("gzip error: %w", err)
	}
	return gz, func() { _ = gz.Close() }, nil
}

// ValidateApply holds gNMIc's rules for an apply request (v0.47 pkg/collector/api/server, validateApplyRequest):
// the collector answers 400 "validate error: <rule>" to a body breaking one, and applies nothing of it.
func ValidateApply(req *ApplyRequest) error {
	if len(req.Targets) > 0 && len(req.Subscriptions) == 0 {
		return errors.New("if targets are provided, at least one subscription is required")
	}
	if len(req.TunnelTargetMatches) > 0 && len(req.Subscriptions) == 0 {
		return errors.New("if tunnel-target-matches are provided, at least one subscription is required")
	}
	if len(req.Inputs) > 0 && len(req.Outputs) == 0 {
		return errors.New("if inputs are provided, at least one output is required")
	}
	return nil
}

func (s *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	body, done, err := readBody(r)
	if err != nil {
		writeErrors(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer done()
	decoded, err := DecodeApply(body, s.Version)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, "decode error: "+err.Error())
		return
	}
	req := decoded.Request
	if err := ValidateApply(&req); err != nil {
		writeErrors(w, http.StatusBadRequest, "validate error: "+err.Error())
		return
	}
	full := emptyConfig()
	maps.Copy(full.Targets, req.Targets)
	maps.Copy(full.Subscriptions, req.Subscriptions)
	maps.Copy(full.Outputs, req.Outputs)
	maps.Copy(full.Inputs, req.Inputs)
	maps.Copy(full.Processors, req.Processors)
	maps.Copy(full.TunnelTargetMatches, req.TunnelTargetMatches)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config = full
	s.applies = append(s.applies, full)
	s.unused = appendNew(s.unused, decoded.Unused...)
	s.pluginErrs = appendNew(s.pluginErrs, decoded.PluginErrors...)
	s.syncStatesLocked()
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleTargetPost(w http.ResponseWriter, r *http.Request) {
	body, done, err := readBody(r)
	if err != nil {
		writeErrors(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer done()
	tc := &types.TargetConfig{}
	unused, err := decodeTarget(body, tc)
	if err != nil {
		writeErrors(w, http.StatusBadRequest, err.Error())
		return
	}
	if tc.Name == "" || tc.Address == "" {
		writeErrors(w, http.StatusBadRequest, "target name and address are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range tc.Subscriptions {
		if _, ok := s.config.Subscriptions[sub]; !ok {
			writeErrors(w, http.StatusNotFound, fmt.Sprintf("subscription %s not found", sub))
			return
		}
	}
	s.unused = appendNew(s.unused, unused...)
	s.config.Targets = maps.Clone(s.config.Targets)
	s.config.Targets[tc.Name] = tc
	s.syncStatesLocked()
	w.WriteHeader(http.StatusOK)
}

// syncStatesLocked brings the state store in line with the configured targets and publishes the changes.
func (s *Server) syncStatesLocked() {
	now := time.Now().UTC()
	for name := range s.states {
		if _, ok := s.config.Targets[name]; !ok {
			delete(s.states, name)
			s.publishLocked("state", name, "delete", nil)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.config.Targets)) {
		cfg := s.config.Targets[name]
		conn := "READY"
		if s.ConnectionState != nil {
			conn = s.ConnectionState(cfg)
		}
		subs := map[string]string{}
		for _, sub := range cfg.Subscriptions {
			subs[sub] = "running"
		}
		want := &TargetState{IntendedState: "enabled", State: "running", ConnectionState: conn, Subscriptions: subs, LastUpdated: now}
		old, ok := s.states[name]
		if ok && old.State == want.State && old.ConnectionState == want.ConnectionState && maps.Equal(old.Subscriptions, want.Subscriptions) {
			continue
		}
		event := "create"
		if ok {
			event = "update"
		}
		s.states[name] = want
		s.publishLocked("state", name, event, cloneState(want))
		s.publishLocked("config", name, event, cfg)
	}
}

func cloneState(ts *TargetState) *TargetState {
	c := *ts
	c.Subscriptions = maps.Clone(ts.Subscriptions)
	return &c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErrors(w http.ResponseWriter, status int, msgs ...string) {
	writeJSON(w, status, apiErrors{Errors: msgs})
}

func appendNew(list []string, values ...string) []string {
	for _, v := range values {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}
