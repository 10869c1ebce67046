// Command katastroma runs the gitops pipeline stages: one stage per process (`katastroma <stage>`) or every stage
// in one process wired over loopback gRPC (`katastroma all-in-one`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quartet-dev/quartet-operator/internal/gitops/provisioner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/netguard"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// RepositoryAllowForTestingEnv names the environment variable that exempts address prefixes, loopback included,
// from the source handler's fetch guard. It exists for the separate-process tests, whose git daemon listens on
// 127.0.0.1; the operator never sets it, and --repository-allow-cidrs is the administrators' setting.
const RepositoryAllowForTestingEnv = "KATASTROMA_REPOSITORY_ALLOW_FOR_TESTING"

const usage = `usage: katastroma <stage|all-in-one|pharos> [flags]

stages: source, renderer, orderer, labeler, provisioner, pruner
all-in-one runs every stage in one process over loopback gRPC.
pharos runs the coordinator (OTLP receiver, replays, crash detection).
`

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(os.Stderr, usage)
		return errors.New("missing the stage")
	}
	mode := args[0]
	if mode == "pharos" {
		return runPharos(args[1:])
	}
	fs := flag.NewFlagSet("katastroma "+mode, flag.ContinueOnError)
	grpcAddr := fs.String("grpc-bind-address", ":50051", "Where the stage serves gRPC.")
	httpAddr := fs.String("http-bind-address", ":8080", "Where the source handler serves POST /webhook/{namespace} and /healthz.")
	next := fs.String("next", "", "Address of the next stage (source→renderer→orderer→labeler→provisioner→pruner).")
	ordererAddr := fs.String("orderer", "", "Orderer address the pruner uses for deletion order (empty: in process).")
	metricsAddr := fs.String("metrics-bind-address", ":9090", "Where Prometheus metrics are served; 0 disables.")
	logLevel := fs.String("log-level", "info", "Log verbosity: debug, info, error, or a number.")
	otlp := fs.String("otlp-endpoint", "", "OTLP/gRPC endpoint for traces; empty uses OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT.")
	staleAfter := fs.Duration("lease-stale-after", 10*time.Minute, "How long an unreleased lease stays active.")
	audience := fs.String("registration-audience", source.DefaultRegistrationAudience,
		"Audience the ServiceAccount tokens of the registration API must be issued for (TokenRequest audiences).")
	maxReplays := fs.Int("max-replay-attempts", 3, "How often one event may be replayed.")
	platform := fs.String("platform", "", "The Platform (<namespace>/<name>) this source handler belongs to: it pins the "+
		"source targets it serves to it and leaves those pinned to another Platform alone (source).")
	d := stage.DefaultConnection
	rpcTimeout := fs.Duration("rpc-timeout", d.RPCTimeout,
		"Deadline of every stage RPC made or served without one; the source handler's call bounds a whole event.")
	keepTime := fs.Duration("keepalive-time", d.KeepaliveTime, "Idle time before a keepalive ping (clients and servers).")
	keepTimeout := fs.Duration("keepalive-timeout", d.KeepaliveTimeout, "How long a keepalive ping may go unanswered.")
	maxAge := fs.Duration("max-connection-age", d.MaxConnectionAge,
		"How long a stage server keeps a connection before the client reconnects (and re-resolves the Service).")
	maxAgeGrace := fs.Duration("max-connection-age-grace", 0,
		"How long streams on an aged connection may finish (0: the larger of --rpc-timeout and 5m).")
	gitTimeout := fs.Duration("git-timeout", source.DefaultGitTimeout, "Deadline of each git fetch or ref listing (source).")
	maxFetches := fs.Int("max-fetches", source.DefaultMaxFetches, "Git fetches running at once; targets fetching the same commit share one (source).")
	maxTenantFetches := fs.Int("max-fetches-per-tenant", source.DefaultMaxFetchesPerTenant, "Git fetches one tenant runs at once (source).")
	repoAllow := fs.String("repository-allow-cidrs", "", "Comma-separated private prefixes repository fetches may "+
		"reach despite the fetch guard (loopback, link-local and 0.0.0.0/8 cannot be exempted) (source).")
	maxFetchBytes := fs.Int64("max-fetch-bytes", source.DefaultMaxFetchBytes, "Bytes of git objects one fetch may hold; more fails that target's event (source).")
	tokenFile := fs.String("stage-token-file", "", "Projected ServiceAccount token (audience "+stage.Audience+") sent with "+
		"every call to another stage.")
	callers := fs.String("stage-callers", "", "Comma-separated namespaces whose stage ServiceAccounts (katastroma-*) may call "+
		"this stage; set, every call needs their token (TokenReview), and every stage but the source handler takes "+
		"work only for namespaces the Platform serves (a tenant namespace its Tenant claimed).")
	verifyTimeout := fs.Duration("verify-timeout", provisioner.DefaultVerifyTimeout, "How long the provisioner "+
		"waits for the applied objects to become healthy (kstatus Current) before failing the event; 0 turns "+
		"the verify off. Must stay below --rpc-timeout (unset, it is lowered to 3/5 of a smaller --rpc-timeout).")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if ns, name, ok := strings.Cut(*platform, "/"); *platform != "" && (!ok || ns == "" || name == "" || strings.Contains(name, "/")) {
		return fmt.Errorf("--platform %q: want <namespace>/<name>", *platform)
	}
	logger, ctx, stop, err := startProcess(*logLevel)
	if err != nil {
		return err
	}
	defer stop()
	shutdownTracing, err := telemetry.SetupTracing(ctx, telemetry.TracingOptions{
		Endpoint: *otlp, ServiceName: "katastroma-" + mode, Version: version})
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.Background()) }()

	o := runner.Options{GRPCAddr: *grpcAddr, HTTPAddr: *httpAddr, Next: *next, OrdererAddr: *ordererAddr,
		Scheme: operator.NewScheme(), Lease: source.LeaseConfig{StaleAfter: *staleAfter, MaxReplays: *maxReplays, Platform: *platform},
		RegistrationAudience: *audience, GitTimeout: *gitTimeout, MaxFetches: *maxFetches,
		MaxFetchesPerTenant: *maxTenantFetches, MaxFetchBytes: *maxFetchBytes,
		Connection: stage.Connection{RPCTimeout: *rpcTimeout, KeepaliveTime: *keepTime, KeepaliveTimeout: *keepTimeout,
			MaxConnectionAge: *maxAge, MaxConnectionAgeGrace: *maxAgeGrace, TokenFile: *tokenFile}}
	if o.RepositoryAllow, err = netguard.ParseAllowedPrefixes(*repoAllow); err != nil {
		return fmt.Errorf("--repository-allow-cidrs: %w", err)
	}
	if v := os.Getenv(RepositoryAllowForTestingEnv); v != "" {
		// The separate-process tests serve their repositories on loopback, which no flag may exempt.
		for _, c := range strings.Split(v, ",") {
			p, err := netip.ParsePrefix(strings.TrimSpace(c))
			if err != nil {
				return fmt.Errorf("%s: %w", RepositoryAllowForTestingEnv, err)
			}
			o.RepositoryAllowForTesting = append(o.RepositoryAllowForTesting, p)
		}
	}
	if o.VerifyTimeout, err = verifyDeadline(fs, *verifyTimeout, *rpcTimeout); err != nil {
		return err
	}
	if *callers != "" || mode == "all-in-one" || mode == runner.Source || mode == runner.Provisioner || mode == runner.Pruner {
		if o.Config, err = ctrl.GetConfig(); err != nil {
			return fmt.Errorf("loading the kubeconfig: %w", err)
		}
	}
	if *callers != "" {
		if o.Connection.Auth, err = stageAuth(o.Config, o.Scheme, *callers, true); err != nil {
			return err
		}
	}
	if *metricsAddr != "0" {
		lis, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: promhttp.HandlerFor(ctrlmetrics.Registry,
			// OpenMetrics carries the exemplars (trace IDs) of the stage metrics to a scraper that asks for it.
			promhttp.HandlerOpts{EnableOpenMetrics: true}),
			ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer func() { _ = srv.Close() }()
	}
	if mode == "all-in-one" {
		p, err := runner.StartAll(ctx, o)
		if err != nil {
			return err
		}
		logger.Info("pipeline running", "webhook", p.WebhookURL(), "source", p.Stages[runner.Source].GRPCAddr)
		return p.Wait()
	}
	r, err := runner.Start(ctx, mode, o)
	if err != nil {
		return err
	}
	logger.Info("stage running", "stage", mode, "grpc", r.GRPCAddr, "http", r.HTTPAddr, "next", *next)
	return r.Wait()
}

// startProcess sets up what every katastroma command shares: the JSON logger (also controller-runtime's) and a
// context that ends on SIGINT or SIGTERM.
func startProcess(logLevel string) (logr.Logger, context.Context, context.CancelFunc, error) {
	logger, err := telemetry.NewLogger(logLevel, false)
	if err != nil {
		return logr.Logger{}, nil, nil, err
	}
	ctrl.SetLogger(logger)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return logger, ctx, stop, nil
}

// verifyDeadline is the provisioner's verify timeout (runner.Options: negative = off). The verify runs inside the
// provisioner's RPC, and every call above it (labeler, orderer, renderer, the source handler's) waits through it,
// so it must end before --rpc-timeout cuts them: an explicit value that does not is refused, the default is
// lowered to 3/5 of a smaller --rpc-timeout (the rest is for fetching, rendering and applying).
func verifyDeadline(fs *flag.FlagSet, verify, rpc time.Duration) (time.Duration, error) {
	if verify == 0 {
		return -1, nil
	}
	if rpc <= 0 || verify < rpc {
		return verify, nil
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "verify-timeout" })
	if explicit {
		return 0, fmt.Errorf("--verify-timeout (%s) must be below --rpc-timeout (%s): the calls that wait for the verify "+
			"would be cut first", verify, rpc)
	}
	return rpc * 3 / 5, nil
}

// stageAuth is the Authenticator of --stage-callers: tokens reviewed by the API server, and, for the pipeline
// stages (served), the work's namespace checked against the Platform's tenants (stage.KubeServed). The stage's
// ServiceAccount needs tokenreviews create and get on namespaces and tenants (the shipped stage roles).
func stageAuth(cfg *rest.Config, scheme *runtime.Scheme, callers string, served bool) (*stage.Authenticator, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	a := &stage.Authenticator{Review: stage.KubeReview(c), Namespaces: strings.Split(callers, ",")}
	if served {
		a.Served = stage.KubeServed(c, a.Namespaces)
	}
	return a, nil
}
