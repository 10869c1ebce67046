package stage

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Connection tunes how the stages talk to each other: deadlines, keepalives and connection ages
// (docs/gitops.md, "Balancing, deadlines and keepalives"). Zero fields take the defaults.
type Connection struct {
	// RPCTimeout is the deadline of every RPC a stage makes or serves without one (--rpc-timeout). The source
	// handler's call to the renderer carries the whole event through every later stage, so it bounds an event.
	RPCTimeout time.Duration
	// KeepaliveTime is how long a connection may be idle before a ping (--keepalive-time): clients ping servers
	// and servers ping clients, so a half-open connection is noticed even while a stream waits.
	KeepaliveTime time.Duration
	// KeepaliveTimeout is how long a ping may go unanswered before the connection is closed (--keepalive-timeout).
	KeepaliveTimeout time.Duration
	// MaxConnectionAge is how long a server keeps a connection before asking the client to reconnect
	// (--max-connection-age): the client resolves the headless Service again and new replicas get work.
	MaxConnectionAge time.Duration
	// MaxConnectionAgeGrace is how long streams still running on an aged connection may finish
	// (--max-connection-age-grace); unset, it is the larger of RPCTimeout and 5m, so an aged connection never cuts
	// an RPC short.
	MaxConnectionAgeGrace time.Duration
	// TokenFile, when set, is the projected ServiceAccount token (audience Audience) sent with every call
	// (--stage-token-file).
	TokenFile string
	// Auth, when set, makes the server accept only calls of its Platform's stages (auth.go).
	Auth *Authenticator
}

// DefaultConnection holds the defaults of every Connection field.
var DefaultConnection = Connection{RPCTimeout: 5 * time.Minute, KeepaliveTime: 30 * time.Second,
	KeepaliveTimeout: 10 * time.Second, MaxConnectionAge: 2 * time.Minute, MaxConnectionAgeGrace: 5 * time.Minute}

// MinPingInterval is the shortest ping interval a stage server admits from a client (keepalive enforcement).
// grpc-go clients never ping more often than every 10 s, whatever KeepaliveTime says, so every client
// configuration is admitted; a peer pinging faster is told to back off (GOAWAY too_many_pings).
const MinPingInterval = 5 * time.Second

// WithDefaults fills the zero fields from DefaultConnection.
func (c Connection) WithDefaults() Connection {
	d := DefaultConnection
	for _, f := range []struct{ v, def *time.Duration }{{&c.RPCTimeout, &d.RPCTimeout},
		{&c.KeepaliveTime, &d.KeepaliveTime}, {&c.KeepaliveTimeout, &d.KeepaliveTimeout},
		{&c.MaxConnectionAge, &d.MaxConnectionAge}} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	if c.MaxConnectionAgeGrace <= 0 {
		c.MaxConnectionAgeGrace = max(c.RPCTimeout, d.MaxConnectionAgeGrace) // an aged connection cuts no RPC
	}
	return c
}

// roundRobin spreads the RPCs of one connection over every address the resolver returns (a headless Service's
// DNS answer lists every ready pod); the default, pick_first, would pin one upstream pod to one downstream pod.
const roundRobin = `{"loadBalancingConfig": [{"round_robin": {}}]}`

// Target makes a bare host:port a dns:/// target, so every address of the name is used; targets with a scheme
// are kept.
func Target(addr string) string {
	if strings.Contains(addr, "://") || strings.HasPrefix(addr, "unix:") {
		return addr
	}
	return "dns:///" + addr
}

// Dial connects to another stage with DefaultConnection (DialWith).
func Dial(target string) (*grpc.ClientConn, error) { return DialWith(target, Connection{}) }

// DialWith connects to another stage: round robin over every address of target (a dns:/// name unless it names
// another scheme), client keepalives, a deadline on every RPC, tracing and baggage propagation; opts come last
// (tests inject a resolver).
func DialWith(target string, c Connection, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	c = c.WithDefaults()
	base := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithPropagators(Propagator))),
		grpc.WithDefaultServiceConfig(roundRobin),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: c.KeepaliveTime, Timeout: c.KeepaliveTimeout,
			PermitWithoutStream: true}),
		grpc.WithChainUnaryInterceptor(unaryDeadline(c.RPCTimeout)),
		grpc.WithChainStreamInterceptor(streamDeadline(c.RPCTimeout)),
	}
	if c.TokenFile != "" {
		base = append(base, grpc.WithPerRPCCredentials(&tokenFile{path: c.TokenFile}))
	}
	return grpc.NewClient(Target(target), append(base, opts...)...)
}

// serverOptions are the keepalive settings of a stage server.
func serverOptions(c Connection) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: c.MaxConnectionAge,
			MaxConnectionAgeGrace: c.MaxConnectionAgeGrace, Time: c.KeepaliveTime, Timeout: c.KeepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: MinPingInterval,
			PermitWithoutStream: true}),
	}
}

// deadlineError names the call and the setting when our own deadline ended it; any other error is unchanged.
func deadlineError(ctx context.Context, method string, d time.Duration, err error) error {
	if err == nil || status.Code(err) != codes.DeadlineExceeded || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	return status.Errorf(codes.DeadlineExceeded, "%s: no answer within the RPC deadline of %s (--rpc-timeout): %v",
		method, d, status.Convert(err).Message())
}

func unaryDeadline(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker,
		opts ...grpc.CallOption) error {
		ctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return deadlineError(ctx, method, d, invoker(ctx, method, req, reply, cc, opts...))
	}
}

func streamDeadline(d time.Duration) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, cancel := context.WithTimeout(ctx, d)
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			cancel()
			return nil, deadlineError(ctx, method, d, err)
		}
		return &deadlineStream{ClientStream: s, ctx: ctx, cancel: cancel, method: method, d: d,
			lastRecv: !desc.ServerStreams}, nil
	}
}

// deadlineStream releases its deadline when the stream ends and names the deadline in the error it ends with.
type deadlineStream struct {
	grpc.ClientStream
	ctx    context.Context
	cancel context.CancelFunc
	method string
	d      time.Duration
	// lastRecv: the server sends one message (client streaming), so the first successful receive ends the stream.
	lastRecv bool
}

func (s *deadlineStream) SendMsg(m any) error {
	return deadlineError(s.ctx, s.method, s.d, s.ClientStream.SendMsg(m))
}

func (s *deadlineStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil || s.lastRecv {
		err = deadlineError(s.ctx, s.method, s.d, err)
		s.cancel()
	}
	return err
}
