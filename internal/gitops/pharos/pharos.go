package pharos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

var (
	spansReceived = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "katastroma_pharos_spans_total", Help: "Gitops spans received over OTLP."})
	replays = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "katastroma_pharos_replays_total", Help: "Replay calls, by outcome (started, refused, unknown, unreachable, superseded; untrusted: an address outside --source-handlers, not dialed) and tenant."},
		[]string{"outcome", LabelTenant})
	gaveUp = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "katastroma_pharos_events_given_up_total", Help: "Events pharos stopped replaying (limit, unknown event, no address), by tenant."},
		[]string{LabelTenant})
	events = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "katastroma_pharos_events", Help: "Tracked events, by state and tenant."}, []string{"state", LabelTenant})
)

func init() { ctrlmetrics.Registry.MustRegister(spansReceived, replays, gaveUp, events) }

// LabelTenant is the metric label of the tenant an event belongs to (the `tenant` attribute of the source
// handler's spans; empty while pharos has seen no span carrying it), so a tenant's dashboard can filter on it.
const LabelTenant = "tenant"

var outcomeNames = map[Outcome]string{Started: "started", Refused: "refused", Unknown: "unknown",
	Unreachable: "unreachable", SupersededOutcome: "superseded", Untrusted: "untrusted"}

// Options configures a pharos instance.
type Options struct {
	Config
	// GRPCAddr serves OTLP/gRPC (default ":4317"); HTTPAddr serves OTLP/HTTP (default ":4318").
	GRPCAddr, HTTPAddr string
	// MaxBodyBytes bounds one export request (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Persister keeps events across restarts (default: in memory, lost with the process).
	Persister Persister
	// Tick is how often crash timers and due replays are checked (default 1s).
	Tick time.Duration
	// ReplayTimeout bounds one Replay call (default 10s).
	ReplayTimeout time.Duration
	// SourceHandlers are the source handler addresses pharos may dial: the ones its Platform deploys
	// (--source-handlers) plus Config.DefaultAddress. A span naming any other address is refused (Untrusted),
	// never dialed; with neither set pharos dials nothing.
	SourceHandlers []string
	// Dial connects to a source handler (default stage.Dial; the katastroma command sends pharos's stage token).
	Dial func(addr string) (*grpc.ClientConn, error)
	// Auth, when set, admits OTLP exports on both ports only with a stage token of the Platform (the collector's
	// or a stage's, see stage.Authenticator); /healthz stays open for the kubelet's probes.
	Auth *stage.Authenticator
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger logr.Logger
}

// Pharos is a running receiver and replay loop.
type Pharos struct {
	opts    Options
	mu      sync.Mutex
	tracker *Tracker
	dirty   bool
	wake    chan struct{}
	conns   map[string]*grpc.ClientConn
	// trusted are the only addresses pharos dials: Options.SourceHandlers and Config.DefaultAddress.
	trusted []string
	// metricTenants are the tenants katastroma_pharos_events has series for (only the loop and save use it).
	metricTenants map[string]bool

	grpcLis, httpLis net.Listener
	grpcSrv          *grpc.Server
	httpSrv          *http.Server
	done             chan error
}

// Start loads the saved events, listens on both OTLP ports and runs the replay loop until ctx is cancelled.
func Start(ctx context.Context, o Options) (*Pharos, error) {
	if o.GRPCAddr == "" {
		o.GRPCAddr = ":4317"
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = ":4318"
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Persister == nil {
		o.Persister = &MemoryPersister{}
	}
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.ReplayTimeout <= 0 {
		o.ReplayTimeout = 10 * time.Second
	}
	if o.Dial == nil {
		o.Dial = stage.Dial
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	saved, err := o.Persister.Load(ctx)
	if err != nil {
		return nil, err
	}
	p := &Pharos{opts: o, tracker: NewTracker(o.Config), wake: make(chan struct{}, 1),
		conns: map[string]*grpc.ClientConn{}, done: make(chan error, 1), trusted: trustedAddresses(o)}
	p.tracker.Restore(saved)
	// The first tick publishes the state: the restored events, and zeros for the events without a tenant.
	p.dirty = true
	p.tracker.OnGiveUp = func(e Event) {
		gaveUp.WithLabelValues(e.Tenant).Inc()
		o.Logger.Info("pharos gave up on the event", "event", e.ID, "replays", e.Replays, "reason", e.Reason)
	}
	if p.grpcLis, err = net.Listen("tcp", o.GRPCAddr); err != nil {
		return nil, err
	}
	if p.httpLis, err = net.Listen("tcp", o.HTTPAddr); err != nil {
		_ = p.grpcLis.Close()
		return nil, err
	}
	grpcOpts := []grpc.ServerOption{grpc.MaxRecvMsgSize(int(o.MaxBodyBytes))}
	handler := httpHandler(o.MaxBodyBytes, p.export)
	if o.Auth != nil {
		grpcOpts = append(grpcOpts, grpc.ChainUnaryInterceptor(o.Auth.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(o.Auth.StreamInterceptor()))
		handler = o.Auth.HTTP(handler, healthPath)
	}
	p.grpcSrv = grpc.NewServer(grpcOpts...)
	collectortrace.RegisterTraceServiceServer(p.grpcSrv, &traceService{p: p})
	p.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 2)
	go func() { errs <- p.grpcSrv.Serve(p.grpcLis) }()
	go func() { errs <- p.httpSrv.Serve(p.httpLis) }()
	go p.run(ctx, errs)
	o.Logger.Info("pharos listening", "otlp-grpc", p.GRPCAddr(), "otlp-http", p.HTTPAddr(), "events", len(saved))
	return p, nil
}

// trustedAddresses are the source handlers pharos may dial, without empties and duplicates.
func trustedAddresses(o Options) []string {
	var out []string
	for _, a := range append(slices.Clone(o.SourceHandlers), o.DefaultAddress) {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// GRPCAddr is the OTLP/gRPC listen address; HTTPAddr the OTLP/HTTP one.
func (p *Pharos) GRPCAddr() string { return p.grpcLis.Addr().String() }

// HTTPAddr is the OTLP/HTTP listen address.
func (p *Pharos) HTTPAddr() string { return p.httpLis.Addr().String() }

// Wait blocks until pharos stopped; the state is saved one last time before.
func (p *Pharos) Wait() error { return <-p.done }

// Events returns the tracked events.
func (p *Pharos) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tracker.Snapshot()
}

type traceService struct {
	collectortrace.UnimplementedTraceServiceServer
	p *Pharos
}

func (s *traceService) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	s.p.export(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// export feeds received spans to the tracker and wakes the loop when something changed, so a failure is replayed
// without waiting for the tick.
func (p *Pharos) export(req *collectortrace.ExportTraceServiceRequest) {
	spans := Spans(req)
	if len(spans) == 0 {
		return
	}
	spansReceived.Add(float64(len(spans)))
	now := p.opts.Now()
	p.mu.Lock()
	changed := false
	for _, s := range spans {
		changed = p.tracker.Observe(now, s) || changed
	}
	p.dirty = p.dirty || changed
	p.mu.Unlock()
	if changed {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (p *Pharos) run(ctx context.Context, errs chan error) {
	tick := time.NewTicker(p.opts.Tick)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err = <-errs:
			break loop
		case <-tick.C:
		case <-p.wake:
		}
		p.step(ctx)
	}
	p.grpcSrv.Stop()
	_ = p.httpSrv.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.save(context.WithoutCancel(ctx))
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	p.done <- err
}

// step makes the due replays, records their answers and saves the state when it changed.
func (p *Pharos) step(ctx context.Context) {
	p.mu.Lock()
	due, changed := p.tracker.Due(p.opts.Now())
	p.dirty = p.dirty || changed
	p.mu.Unlock()
	for _, r := range due {
		o, newTrace, msg := p.replay(ctx, r)
		if o == Untrusted {
			p.opts.Logger.Info("pharos refused a source handler address its Platform does not deploy; not dialed",
				"event", r.EventID, "address", r.Address, "known", p.trusted)
		}
		p.mu.Lock()
		before, _ := p.tracker.Get(r.EventID)
		p.tracker.Result(p.opts.Now(), r.EventID, o, newTrace, msg)
		e, _ := p.tracker.Get(r.EventID)
		p.dirty = true
		p.mu.Unlock()
		replays.WithLabelValues(outcomeNames[o], before.Tenant).Inc()
		p.opts.Logger.Info("replay", "event", r.EventID, "source", r.Address, "outcome", outcomeNames[o],
			"trace", newTrace, "message", msg, "replays", e.Replays, "state", e.State)
	}
	p.save(ctx)
}

func (p *Pharos) save(ctx context.Context) {
	p.mu.Lock()
	if !p.dirty {
		p.mu.Unlock()
		return
	}
	snap := p.tracker.Snapshot()
	p.dirty = false
	p.mu.Unlock()
	// Every state of every tenant still tracked is set (0 included), and a tenant whose events were all
	// forgotten drops out instead of freezing at its last values.
	type key struct {
		state  State
		tenant string
	}
	counts := map[key]int{}
	tenants := map[string]bool{"": true}
	for _, e := range snap {
		counts[key{e.State, e.Tenant}]++
		tenants[e.Tenant] = true
	}
	for tenant := range p.metricTenants {
		if !tenants[tenant] {
			events.DeletePartialMatch(prometheus.Labels{LabelTenant: tenant})
		}
	}
	// A tenant's give-ups and replays count from zero as soon as one of its events is tracked, so increase() in
	// the replays-exhausted alert sees its first give-up.
	for tenant := range tenants {
		if !p.metricTenants[tenant] {
			gaveUp.WithLabelValues(tenant)
			for _, outcome := range outcomeNames {
				replays.WithLabelValues(outcome, tenant)
			}
		}
	}
	p.metricTenants = tenants
	for tenant := range tenants {
		for _, s := range []State{Running, Failed, Replaying, Done, GaveUp, Superseded} {
			events.WithLabelValues(string(s), tenant).Set(float64(counts[key{s, tenant}]))
		}
	}
	if err := p.opts.Persister.Save(ctx, snap); err != nil {
		p.opts.Logger.Error(err, "saving the pharos state; retrying on the next tick")
		p.mu.Lock()
		p.dirty = true
		p.mu.Unlock()
	}
}

// replay calls Replay on the source handler and classifies the answer. An address outside the known source
// handlers is refused before anything is dialed: spans come from the network, and a span naming an arbitrary
// address must not make pharos connect there.
func (p *Pharos) replay(ctx context.Context, r Replay) (Outcome, string, string) {
	if !slices.Contains(p.trusted, r.Address) {
		return Untrusted, "", fmt.Sprintf("source handler %q is not one of the Platform's source handlers %v; not dialed",
			r.Address, p.trusted)
	}
	conn, err := p.conn(r.Address)
	if err != nil {
		return Unreachable, "", err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReplayTimeout)
	defer cancel()
	resp, err := katastromav1.NewSourceHandlerServiceClient(conn).Replay(ctx,
		&katastromav1.ReplayRequest{EventId: r.EventID})
	if stage.IsSuperseded(err) {
		return SupersededOutcome, "", status.Convert(err).Message()
	}
	switch status.Code(err) {
	case codes.OK:
		return Started, resp.GetEventId(), ""
	case codes.FailedPrecondition:
		return Refused, "", status.Convert(err).Message()
	case codes.NotFound, codes.InvalidArgument:
		return Unknown, "", status.Convert(err).Message()
	default:
		return Unreachable, "", fmt.Sprintf("%s: %s", status.Code(err), status.Convert(err).Message())
	}
}

// conn returns a cached connection to addr; grpc.NewClient connects lazily, so this does not block.
func (p *Pharos) conn(addr string) (*grpc.ClientConn, error) {
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := p.opts.Dial(addr)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}
