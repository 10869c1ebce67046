// Package runner builds and runs the gitops stages: one stage per process (each dialing the next over gRPC) or
// all of them in one process wired over loopback gRPC.
package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katastromav1 "github.com/quartet-dev/quartet-operator/internal/gitops/gen/katastroma/v1"
	"github.com/quartet-dev/quartet-operator/internal/gitops/labeler"
	"github.com/quartet-dev/quartet-operator/internal/gitops/orderer"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/provisioner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/pruner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/renderer"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
)

// Stage names, also the subcommands of cmd/katastroma.
const (
	Source      = "source"
	Renderer    = "renderer"
	Orderer     = "orderer"
	Labeler     = "labeler"
	Provisioner = "provisioner"
	Pruner      = "pruner"
)

// Stages lists the stages in pipeline order.
var Stages = []string{Source, Renderer, Orderer, Labeler, Provisioner, Pruner}

// Options configures one stage.
type Options struct {
	// GRPCAddr is where the stage serves gRPC (":0" picks a port).
	GRPCAddr string
	// HTTPAddr is where the source handler serves the webhook and /healthz.
	HTTPAddr string
	// Next is the address of the next stage (renderer for source, orderer for renderer, …); empty ends the chain.
	Next string
	// OrdererAddr is the orderer the pruner uses for deletion order; empty orders in process.
	OrdererAddr string
	// Config and Scheme reach the API server as the stage's own (platform) identity: source, provisioner, pruner.
	Config *rest.Config
	Scheme *runtime.Scheme
	// Lease tunes leases and replays (source).
	Lease source.LeaseConfig
	// RegistrationAudience is the token audience of the source handler's registration API (empty: the default).
	RegistrationAudience string
	// BeforeStream is the source handler's test seam (see source.Handler).
	BeforeStream func(source.Target, string)
	// ReconcileTick is how often the source handler looks for source targets due for their periodic reconcile
	// (0: every 10s).
	ReconcileTick time.Duration
	// VerifyTimeout bounds the provisioner's health verify (0: provisioner.DefaultVerifyTimeout; negative turns it
	// off); VerifyInterval is the pause between its rounds (0: 2s).
	VerifyTimeout, VerifyInterval time.Duration
	// BeforeBatch is the provisioner's test seam (see provisioner.Server).
	BeforeBatch func(pipeline.Context, schema.GroupKind)
	// Listener, when set, is used instead of listening on GRPCAddr.
	Listener net.Listener
	// Connection sets the deadlines, keepalives and connection ages of the stage's server and of its connections
	// to other stages (zero fields: stage.DefaultConnection).
	Connection stage.Connection
	// GitTimeout bounds each git fetch or ref listing of the source handler (0: source.DefaultGitTimeout).
	GitTimeout time.Duration
	// RepositoryAllow are the administrator's exemptions from the source handler's fetch guard
	// (--repository-allow-cidrs, checked with netguard.CheckAllowedPrefix); RepositoryAllowForTesting exempts any
	// prefix, loopback included, for tests and make dev, which serve their repositories on 127.0.0.1.
	RepositoryAllow, RepositoryAllowForTesting []netip.Prefix
	// MaxFetches bounds the source handler's concurrent git fetches (0: source.DefaultMaxFetches).
	MaxFetches int
	// MaxFetchesPerTenant and MaxFetchBytes bound one tenant's fetches and one fetch's size (0: the defaults).
	MaxFetchesPerTenant int
	MaxFetchBytes       int64
}

// Running is a started stage.
type Running struct {
	Name     string
	GRPCAddr string
	HTTPAddr string
	Handler  *source.Handler
	done     chan error
}

// Wait returns when the stage stopped (after ctx ended and the drain finished).
func (r *Running) Wait() error { return <-r.done }

func dial(addr string, c stage.Connection) (*grpc.ClientConn, error) {
	if addr == "" {
		return nil, nil
	}
	return stage.DialWith(addr, c)
}

// Start starts one stage; it stops, draining in-flight work, when ctx ends.
func Start(ctx context.Context, name string, o Options) (*Running, error) {
	next, err := dial(o.Next, o.Connection)
	if err != nil {
		return nil, err
	}
	var (
		register func(*grpc.Server)
		handler  *source.Handler
		// actions are what the stage counts in katastroma_stage_objects_total (stage.InitObjects).
		actions []string
	)
	needKube := func() (*provisioner.Clients, error) {
		if o.Config == nil {
			return nil, fmt.Errorf("stage %s needs a kubeconfig", name)
		}
		return provisioner.NewClients(o.Config, o.Scheme)
	}
	switch name {
	case Renderer:
		srv := &renderer.Server{}
		if next != nil {
			srv.Next = katastromav1.NewOrdererServiceClient(next)
		}
		register = func(g *grpc.Server) { katastromav1.RegisterRendererServiceServer(g, srv) }
		actions = []string{renderer.ActionRendered, renderer.ActionSkipped}
	case Orderer:
		srv := &orderer.Server{}
		if next != nil {
			srv.Next = katastromav1.NewLabelerServiceClient(next)
		}
		register = func(g *grpc.Server) { katastromav1.RegisterOrdererServiceServer(g, srv) }
		actions = []string{orderer.ActionOrdered}
	case Labeler:
		srv := &labeler.Server{}
		if next != nil {
			srv.Next = katastromav1.NewProvisionerServiceClient(next)
		}
		register = func(g *grpc.Server) { katastromav1.RegisterLabelerServiceServer(g, srv) }
		actions = []string{labeler.ActionLabeled}
	case Provisioner:
		clients, err := needKube()
		if err != nil {
			return nil, err
		}
		srv := &provisioner.Server{Clients: clients, BeforeBatch: o.BeforeBatch, VerifyTimeout: o.VerifyTimeout,
			VerifyInterval: o.VerifyInterval}
		if next != nil {
			srv.Next = katastromav1.NewPrunerServiceClient(next)
		}
		register = func(g *grpc.Server) { katastromav1.RegisterProvisionerServiceServer(g, srv) }
		actions = []string{provisioner.ActionApplied, provisioner.ActionUnchanged, provisioner.ActionFailed,
			provisioner.ActionDeleted, provisioner.ActionSkipped, provisioner.ActionRepaired}
	case Pruner:
		clients, err := needKube()
		if err != nil {
			return nil, err
		}
		srv := &pruner.Server{Clients: clients}
		if o.OrdererAddr != "" {
			oc, err := dial(o.OrdererAddr, o.Connection)
			if err != nil {
				return nil, err
			}
			srv.Orderer = katastromav1.NewOrdererServiceClient(oc)
		}
		register = func(g *grpc.Server) { katastromav1.RegisterPrunerServiceServer(g, srv) }
		actions = []string{provisioner.ActionDeleted, provisioner.ActionSkipped, provisioner.ActionFailed}
	case Source:
		ensureTracerProvider()
		if o.Config == nil {
			return nil, errors.New("stage source needs a kubeconfig")
		}
		c, err := client.New(o.Config, client.Options{Scheme: o.Scheme})
		if err != nil {
			return nil, err
		}
		if next == nil {
			return nil, errors.New("stage source needs the renderer address")
		}
		handler = &source.Handler{Client: c, Renderer: katastromav1.NewRendererServiceClient(next), Lease: o.Lease,
			Audience: o.RegistrationAudience, BeforeStream: o.BeforeStream, GitTimeout: o.GitTimeout,
			MaxFetches: o.MaxFetches, MaxFetchesPerTenant: o.MaxFetchesPerTenant, MaxFetchBytes: o.MaxFetchBytes,
			Guard: netguard.New(netguard.AllowPrefixes(o.RepositoryAllow...),
				netguard.AllowPrefixesForTesting(o.RepositoryAllowForTesting...))}
		handler.Start(ctx)
		tick := o.ReconcileTick
		if tick <= 0 {
			tick = 10 * time.Second
		}
		go handler.Reconcile(ctx, tick)
		srv := &source.Server{Handler: handler}
		register = func(g *grpc.Server) { katastromav1.RegisterSourceHandlerServiceServer(g, srv) }
		actions = []string{source.ActionTargets}
	default:
		return nil, fmt.Errorf("unknown stage %q (want one of %v)", name, Stages)
	}
	lis := o.Listener
	if lis == nil {
		if lis, err = net.Listen("tcp", o.GRPCAddr); err != nil {
			return nil, err
		}
	}
	r := &Running{Name: name, GRPCAddr: lis.Addr().String(), Handler: handler, done: make(chan error, 1)}
	if name == Source && o.Connection.Auth != nil {
		// The source handler's RPCs (Retrieve, Replay) carry no pipeline baggage: they name a target or an event
		// the handler reads itself, through RoleBindings only served namespaces have.
		o.Connection.Auth = o.Connection.Auth.WithoutServed()
	}
	srv := stage.NewWith(name, o.Connection, register)
	// In-flight work may finish before the stage stops: an event lasts at most a git fetch and one call.
	drain := DrainTimeout(o.Connection, o.GitTimeout)
	srv.DrainTimeout = drain
	stage.InitObjects(name, actions...)
	var httpSrv *http.Server
	var httpLis net.Listener
	if handler != nil && o.HTTPAddr != "" {
		if httpLis, err = net.Listen("tcp", o.HTTPAddr); err != nil {
			_ = lis.Close()
			return nil, err
		}
		r.HTTPAddr = httpLis.Addr().String()
		// Bounded reads: the webhook and the registration API answer unauthenticated senders first.
		httpSrv = &http.Server{Handler: handler.Mux(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	}
	go func() {
		var wg sync.WaitGroup
		var herr error
		if httpSrv != nil {
			wg.Go(func() {
				if err := httpSrv.Serve(httpLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
					herr = err
				}
			})
			wg.Go(func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				_ = httpSrv.Shutdown(sctx)
			})
		}
		err := srv.Serve(ctx, lis)
		wg.Wait()
		if handler != nil && !handler.WaitFor(drain) {
			herr = errors.Join(herr, fmt.Errorf("events still running after the drain timeout of %s; their leases go "+
				"stale and pharos replays them", drain))
		}
		if next != nil {
			_ = next.Close()
		}
		r.done <- errors.Join(err, herr)
	}()
	return r, nil
}

// DrainTimeout bounds how long a stopping stage lets in-flight work finish: the longest event (a git fetch under
// gitTimeout, source.DefaultGitTimeout when 0, then one call under the connection's RPC timeout) and a margin. The
// Platform gives stage pods a termination grace period above it (platform.TerminationGracePeriod).
func DrainTimeout(c stage.Connection, gitTimeout time.Duration) time.Duration {
	if gitTimeout <= 0 {
		gitTimeout = source.DefaultGitTimeout
	}
	return c.WithDefaults().RPCTimeout + gitTimeout + 30*time.Second
}

// ensureTracerProvider installs an SDK tracer provider without exporter when the global one is a no-op: event IDs
// and lease IDs are trace and span IDs, so they must be real even when no span is exported.
func ensureTracerProvider() {
	_, span := otel.Tracer(stage.TracerName).Start(context.Background(), "probe")
	defer span.End()
	if !span.SpanContext().IsValid() {
		otel.SetTracerProvider(sdktrace.NewTracerProvider())
	}
}

// Pipeline is every stage in one process.
type Pipeline struct {
	Stages map[string]*Running
}

// WebhookURL is the source handler's webhook base URL.
func (p *Pipeline) WebhookURL() string { return "http://" + p.Stages[Source].HTTPAddr }

// Wait waits for every stage to stop.
func (p *Pipeline) Wait() error {
	var errs []error
	for _, name := range Stages {
		errs = append(errs, p.Stages[name].Wait())
	}
	return errors.Join(errs...)
}

// StartAll starts every stage on loopback listeners wired into one pipeline (the pruner orders deletions through
// the orderer); o.GRPCAddr, o.Next and o.Listener are ignored and o.HTTPAddr is the webhook listener.
func StartAll(ctx context.Context, o Options) (*Pipeline, error) {
	lis := map[string]net.Listener{}
	for _, name := range Stages {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			for _, l := range lis {
				_ = l.Close()
			}
			return nil, err
		}
		lis[name] = l
	}
	p := &Pipeline{Stages: map[string]*Running{}}
	for i, name := range Stages {
		so := o
		so.Listener, so.Next, so.OrdererAddr = lis[name], "", lis[Orderer].Addr().String()
		if i+1 < len(Stages) {
			so.Next = lis[Stages[i+1]].Addr().String()
		}
		if name != Source {
			so.HTTPAddr = ""
		}
		r, err := Start(ctx, name, so)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		p.Stages[name] = r
	}
	return p, nil
}
