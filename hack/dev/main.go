// Command dev is `make dev`: it starts the cluster-grade local control plane on loopback (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok's simulated nodes) with every CRD and webhook configuration, runs
// the operator's manager against it with the webhooks served locally, applies config/samples, waits until they
// converge, and prints how to reach it. Ctrl-C tears everything down; with --exit-when-converged it tears down and
// exits as soon as the samples converged (status 1, naming the samples that did not, after 3 minutes).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/quartet-dev/quartet-operator/internal/telemetry"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/devstack"
)

// convergeTimeout bounds how long the samples may take to reach their steady states.
const convergeTimeout = 3 * time.Minute

// devConfig is what one `make dev` run uses: main fills it from flags and the environment, tests with a temporary
// directory and free ports.
type devConfig struct {
	// Dir holds the kubeconfig, the Fleet CA, the attribute source and the gitops repository (.dev by default).
	Dir string
	// FleetAddr, FleetSourceAddr and RegistryAddr are where the local Fleet API, its attribute source and the MCP
	// registry listen; port 0 picks a free one.
	FleetAddr, FleetSourceAddr, RegistryAddr string
	// Collectors starts the gNMIc collector stand-ins behind the sample Cluster's pods.
	Collectors bool
	// RealNode starts a real node (containerd, runc, the kubelet, kube-proxy, kube-router's firewall) beside the
	// simulated ones; it needs root and `make realnode`.
	RealNode bool
	// ConvergeTimeout bounds the wait for the samples (convergeTimeout in `make dev`).
	ConvergeTimeout time.Duration
	// ExitWhenConverged returns once the samples converged (an error naming the ones that did not) instead of
	// serving until ctx ends.
	ExitWhenConverged bool
	// Converged, when set, is called with the running stack once every sample converged, before it is torn down.
	Converged func(ctx context.Context, s *devStack)
	// Logger receives the control plane's and manager's logs; nil leaves that to testenv (discarded unless
	// QUARTET_TEST_LOGS is set).
	Logger   *logr.Logger
	Out, Err io.Writer
}

func main() {
	exitWhenConverged := flag.Bool("exit-when-converged", false,
		"stop everything and exit once every sample converged (exit status 1 naming the ones that did not within "+
			convergeTimeout.String()+"), instead of serving until Ctrl-C")
	flag.Parse()
	logger, err := telemetry.NewLogger(envOr("LOG_LEVEL", "info"), false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "make dev:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err = run(ctx, devConfig{
		Dir:               envOr("QUARTET_DEV_DIR", filepath.Join(testenv.RepoRoot(), ".dev")),
		FleetAddr:         envOr("FLEET_DEV_ADDR", "127.0.0.1:8444"),
		FleetSourceAddr:   envOr("FLEET_DEV_SOURCE_ADDR", "127.0.0.1:8445"),
		RegistryAddr:      envOr("QUARTET_DEV_REGISTRY_ADDR", "127.0.0.1:9090"),
		Collectors:        os.Getenv("QUARTET_DEV_GNMIC_COLLECTOR") != "false",
		RealNode:          os.Getenv("QUARTET_DEV_REAL_NODE") == "true",
		ConvergeTimeout:   convergeTimeout,
		ExitWhenConverged: *exitWhenConverged,
		Logger:            &logger, Out: os.Stdout, Err: os.Stderr,
	})
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "make dev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cfg devConfig) error {
	s, err := startStack(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.close()

	reached := func(what string, after time.Duration) {
		fmt.Fprintf(cfg.Out, "make dev: %s (%s)\n", what, after.Round(100*time.Millisecond))
	}
	missing := devstack.WaitConverged(ctx, s.env.Client, cfg.ConvergeTimeout, reached)
	if ctx.Err() != nil {
		if cfg.ExitWhenConverged {
			return fmt.Errorf("interrupted before the samples converged (waiting for %s): %w", strings.Join(missing, ", "), ctx.Err())
		}
		return nil // Ctrl-C while waiting
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("not converged after %s: %s (see the objects' conditions; cluster logs in %s, kept with QUARTET_TEST_KEEP_LOGS=1)",
			cfg.ConvergeTimeout, strings.Join(missing, ", "), s.env.Cluster.LogDir())
		if cfg.ExitWhenConverged {
			return fmt.Errorf("%s", msg)
		}
		fmt.Fprintln(cfg.Err, "make dev:", msg)
	}
	if cfg.Converged != nil {
		cfg.Converged(ctx, s)
	}
	if cfg.ExitWhenConverged {
		fmt.Fprintf(cfg.Out, "make dev: every sample converged (%d applied); stopping (--exit-when-converged)\n", s.applied)
		return nil
	}
	fmt.Fprint(cfg.Out, s.help())
	<-ctx.Done()
	return nil
}

func envOr(key, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		return v
	}
	return fallback
}
