// Command manager runs quartet-operator: the controllers and admission webhooks of the fleet, gnmic, agentrax
// and gitops API groups in one process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	// Every flag can also come from its QUARTET_* variable: OLM's Subscription can set env, never args.
	cl, err := manager.ParseCommandLine(os.Args[0], os.Args[1:], os.Environ(), os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	opts := cl.Options
	logger, err := telemetry.NewLogger(cl.LogLevel, false)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	shutdownTracing, err := telemetry.SetupTracing(ctx, telemetry.TracingOptions{
		Endpoint: cl.OTLPEndpoint, ServiceName: "quartet-operator", Version: version,
	})
	if err != nil {
		return err
	}
	defer func() {
		// Flush spans with a fresh context (ctx is already cancelled on shutdown), bounded to 5 s.
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(flushCtx); err != nil {
			logger.Error(err, "flushing traces")
		}
	}()

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	mgr, err := manager.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	logger.Info("starting manager", "version", version)
	return mgr.Start(ctx)
}
