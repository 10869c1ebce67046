package cmstore

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// DefaultBindAddress is --registry-bind-address's default.
const DefaultBindAddress = ":9090"

// Service is the registry as the manager runs it. Every replica serves the HTTP API and follows the
// ConfigMap; the elected leader additionally reloads the state, writes and sweeps.
type Service struct {
	Registry  *registry.Registry
	Addr      string
	Auth      registry.Authenticator
	Watcher   client.WithWatch
	Namespace string
	// SweepInterval is registry.SweepInterval when zero.
	SweepInterval time.Duration
	// Listening, when set, receives the bound address (tests bind ":0").
	Listening func(addr string)
	// TLSCertDir, when set, holds tls.crt and tls.key (reloaded when they change): the API is then served over
	// HTTPS only. Without it the API is plain HTTP and refuses writes unless PlaintextWrites is set.
	TLSCertDir string
	// PlaintextWrites accepts writes over plain HTTP (development only).
	PlaintextWrites bool
}

// AddTo registers the service's runnables with a manager: one that runs on every replica and one that runs
// only on the leader.
func (s *Service) AddTo(mgr manager.Manager) error {
	if err := mgr.Add(everyReplica{s}); err != nil {
		return err
	}
	return mgr.Add(leaderOnly{s})
}

type everyReplica struct{ s *Service }

// NeedLeaderElection is false: followers serve reads too.
func (everyReplica) NeedLeaderElection() bool { return false }

// Start serves the API and follows the ConfigMap until ctx ends.
func (r everyReplica) Start(ctx context.Context) error {
	addr := r.s.Addr
	if addr == "" {
		addr = DefaultBindAddress
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if r.s.Listening != nil {
		r.s.Listening(ln.Addr().String())
	}
	if r.s.TLSCertDir != "" {
		if ln, err = registry.ListenTLS(ctx, ln, r.s.TLSCertDir); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler: registry.HandlerWith(r.s.Registry, r.s.Auth,
			registry.HandlerOptions{PlaintextWrites: r.s.PlaintextWrites}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() { _ = Follow(ctx, r.s.Watcher, r.s.Namespace, "", r.s.Registry) }()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type leaderOnly struct{ s *Service }

// NeedLeaderElection is true: only the leader writes and sweeps.
func (leaderOnly) NeedLeaderElection() bool { return true }

// Start takes over as the writer: reload the ConfigMap, then sweep until leadership ends.
func (r leaderOnly) Start(ctx context.Context) error {
	if err := r.s.Registry.BecomeLeader(ctx); err != nil {
		return err
	}
	defer r.s.Registry.SetLeader(false)
	r.s.Registry.RunSweeper(ctx, r.s.SweepInterval)
	return nil
}
