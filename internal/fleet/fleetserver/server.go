// Package fleetserver is a local Grafana Fleet Management API: the SDK's own Connect handlers
// (pipelinev1connect, collectorv1connect) over TLS with the documented semantics, so the operator can be tested
// and tried out without Grafana Cloud. It speaks the real wire protocol (Connect unary, binary protobuf and
// protojson), records every request for assertions and injects faults on demand.
package fleetserver

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	"github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1/collectorv1connect"
	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1/pipelinev1connect"
	"google.golang.org/protobuf/proto"
)

// FirstID is the first pipeline ID the server assigns.
const FirstID = 1001

// Call is one recorded request.
type Call struct {
	// Procedure is the RPC path, e.g. /pipeline.v1.PipelineService/UpsertPipeline.
	Procedure string
	// Method is the RPC name, e.g. UpsertPipeline.
	Method string
	// ContentType is the request's content type (application/proto or application/json).
	ContentType string
	// Caller is the purpose the operator's client names in its User-Agent (quartet-operator (<caller>)), e.g.
	// drift-check; empty for ordinary reconcile calls.
	Caller string
	// Request is a copy of the request message.
	Request proto.Message
	// Code is the Connect code of the answer (0 for success).
	Code connect.Code
	// At is when the request arrived.
	At time.Time
}

// Fault makes matching requests fail.
type Fault struct {
	// Method is the RPC name the fault applies to, e.g. UpsertPipeline; empty matches every method.
	Method string
	// Code is returned as a Connect error (ResourceExhausted is HTTP 429 on the wire).
	Code connect.Code
	// Times is how many requests fail; 0 means until ClearFaults.
	Times int
	// RetryAfter, when set, is sent as the Retry-After header (whole seconds) with the error, as Fleet does on 429.
	RetryAfter time.Duration
	// Caller limits the fault to calls of that caller (see Call.Caller); empty means ordinary calls only, so a
	// background check never takes a fault meant for the reconcile under test.
	Caller string
}

// Server is the local Fleet Management API.
type Server struct {
	// Username and Password are the Basic credentials every request must carry.
	Username, Password string

	mu         sync.Mutex
	nextID     int
	pipelines  map[string]*pipelinev1.Pipeline // by ID
	collectors map[string]*collectorv1.Collector
	calls      []Call
	faults     []*Fault
	latency    time.Duration
	vanish     map[string]bool // pipeline names whose next upsert is answered 404
	now        func() time.Time

	httpServer *httptest.Server
}

// New returns a server with no state, expecting the given Basic credentials.
func New(username, password string) *Server {
	return &Server{
		Username: username, Password: password,
		nextID: FirstID, pipelines: map[string]*pipelinev1.Pipeline{}, collectors: map[string]*collectorv1.Collector{},
		vanish: map[string]bool{}, now: time.Now,
	}
}

// Handler serves both services under their Connect paths, checking Basic auth.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	opts := connect.WithInterceptors(s.interceptor())
	mux.Handle(pipelinev1connect.NewPipelineServiceHandler(&pipelineService{s: s}, opts))
	mux.Handle(collectorv1connect.NewCollectorServiceHandler(&collectorService{s: s}, opts))
	return mux
}

// Start serves over TLS on a loopback port chosen by the system.
func (s *Server) Start() { s.StartOn(nil) }

// StartOn serves over TLS on l (nil: a loopback port chosen by the system).
func (s *Server) StartOn(l net.Listener) {
	hs := httptest.NewUnstartedServer(s.Handler())
	if l != nil {
		_ = hs.Listener.Close()
		hs.Listener = l
	}
	hs.EnableHTTP2 = true
	hs.StartTLS()
	s.httpServer = hs
}

// Close stops the server.
func (s *Server) Close() {
	if s.httpServer != nil {
		s.httpServer.Close()
	}
}

// URL is the https base URL.
func (s *Server) URL() string { return s.httpServer.URL }

// CAPEM is the PEM of the self-signed certificate the server presents; trust it to connect.
func (s *Server) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.httpServer.Certificate().Raw})
}

// interceptor checks auth, applies latency and faults, and records the call.
func (s *Server) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			procedure := req.Spec().Procedure
			method := procedure[strings.LastIndex(procedure, "/")+1:]
			msg, _ := req.Any().(proto.Message)
			call := Call{Procedure: procedure, Method: method, ContentType: req.Header().Get("Content-Type"), At: time.Now(),
				Caller: callerOf(req.Header().Get("User-Agent"))}
			if msg != nil {
				call.Request = proto.Clone(msg)
			}
			s.mu.Lock()
			latency := s.latency
			fault := s.takeFault(method, call.Caller)
			s.mu.Unlock()
			if latency > 0 {
				select {
				case <-time.After(latency):
				case <-ctx.Done():
				}
			}
			var res connect.AnyResponse
			var err error
			switch {
			case !s.authorized(req.Header().Get("Authorization")):
				err = connect.NewError(connect.CodeUnauthenticated, errString("invalid credentials"))
			case fault != nil:
				ce := connect.NewError(fault.Code, errString("injected fault"))
				if fault.RetryAfter > 0 {
					ce.Meta().Set("Retry-After", strconv.Itoa(int(fault.RetryAfter.Seconds())))
				}
				err = ce
			default:
				res, err = next(ctx, req)
			}
			call.Code = connect.CodeOf(err)
			if err == nil {
				call.Code = 0
			}
			s.mu.Lock()
			s.calls = append(s.calls, call)
			s.mu.Unlock()
			return res, err
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func (s *Server) authorized(header string) bool {
	raw, ok := strings.CutPrefix(header, "Basic ")
	if !ok {
		return false
	}
	dec, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return false
	}
	s.mu.Lock()
	want := s.Username + ":" + s.Password
	s.mu.Unlock()
	return subtle.ConstantTimeCompare(dec, []byte(want)) == 1
}

// callerOf reads the caller from a User-Agent of the form "quartet-operator (<caller>)".
func callerOf(userAgent string) string {
	rest, ok := strings.CutPrefix(userAgent, "quartet-operator (")
	if !ok {
		return ""
	}
	caller, _, _ := strings.Cut(rest, ")")
	return caller
}

// takeFault returns the first fault for method and caller, consuming one of its times. Call with mu held.
func (s *Server) takeFault(method, caller string) *Fault {
	for i, f := range s.faults {
		if (f.Method != "" && f.Method != method) || f.Caller != caller {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		return f
	}
	return nil
}

// SetCredentials changes the Basic credentials the server accepts (a rotated token).
func (s *Server) SetCredentials(username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Username, s.Password = username, password
}

// InjectFault adds a fault; faults are checked in the order added.
func (s *Server) InjectFault(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault and the latency.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults, s.latency = nil, 0
}

// SetLatency delays every answer by d.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// VanishPipeline deletes the named pipeline and answers its next upsert with not_found (404), as Fleet does when
// a pipeline disappears under an in-flight update.
func (s *Server) VanishPipeline(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.pipelines {
		if p.GetName() == name {
			delete(s.pipelines, id)
		}
	}
	s.vanish[name] = true
}

// Calls returns a copy of the recorded calls, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the recorded calls of one method.
func (s *Server) CallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// CallsFrom returns the recorded calls of one method made by caller ("" for ordinary calls).
func (s *Server) CallsFrom(method, caller string) []Call {
	var out []Call
	for _, c := range s.CallsTo(method) {
		if c.Caller == caller {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

// Pipelines returns copies of the stored pipelines, by ID.
func (s *Server) Pipelines() map[string]*pipelinev1.Pipeline {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*pipelinev1.Pipeline, len(s.pipelines))
	for id, p := range s.pipelines {
		out[id] = proto.Clone(p).(*pipelinev1.Pipeline)
	}
	return out
}

// PipelineByName returns a copy of the named pipeline, or nil.
func (s *Server) PipelineByName(name string) *pipelinev1.Pipeline {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.byName(name); p != nil {
		return proto.Clone(p).(*pipelinev1.Pipeline)
	}
	return nil
}

// PutCollector stores a collector as if it had registered itself.
func (s *Server) PutCollector(c *collectorv1.Collector) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c = proto.Clone(c).(*collectorv1.Collector)
	if c.CreatedAt == nil {
		c.CreatedAt = timestamp(s.now())
	}
	if c.UpdatedAt == nil {
		c.UpdatedAt = c.CreatedAt
	}
	s.collectors[c.GetId()] = c
}

// Collector returns a copy of the stored collector, or nil.
func (s *Server) Collector(id string) *collectorv1.Collector {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.collectors[id]; ok {
		return proto.Clone(c).(*collectorv1.Collector)
	}
	return nil
}

// PutPipeline stores a pipeline as if someone had upserted it outside the operator (the Grafana UI, Terraform)
// and returns the stored copy with its ID. Names that are not valid upsert names (e.g. with spaces, which Fleet
// accepts from other clients) are stored as given.
func (s *Server) PutPipeline(p *pipelinev1.Pipeline) *pipelinev1.Pipeline {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.write(p, s.byName(p.GetName()), false)
}

// RemovePipeline deletes a pipeline by ID outside the operator.
func (s *Server) RemovePipeline(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pipelines, id)
}

// RemoveCollector forgets a collector, as Fleet does when it is deleted.
func (s *Server) RemoveCollector(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.collectors, id)
}
