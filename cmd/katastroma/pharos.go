package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pharos"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// runPharos runs the coordinator. It has its own flags: it is not a pipeline stage (no next stage, no lease) and
// exports no traces itself, so its Replay calls cannot loop back to it through the collector.
func runPharos(args []string) error {
	fs := flag.NewFlagSet("katastroma pharos", flag.ContinueOnError)
	grpcAddr := fs.String("otlp-grpc-address", ":4317", "Where OTLP/gRPC trace exports are received.")
	httpAddr := fs.String("otlp-http-address", ":4318", "Where OTLP/HTTP POST /v1/traces is received.")
	maxBody := fs.Int64("max-request-bytes", pharos.DefaultMaxBodyBytes, "Largest accepted OTLP request.")
	source := fs.String("source-handler", "", "Source handler gRPC address used when no span names one ("+
		pharos.AttrSourceAddress+").")
	var sourceHandlers []string
	fs.Func("source-handlers", "Comma-separated source handler gRPC addresses pharos may dial (the Platform's); a span naming any other address is refused, never dialed. --source-handler is always included.",
		func(v string) error {
			for _, a := range strings.Split(v, ",") {
				if a = strings.TrimSpace(a); a != "" {
					sourceHandlers = append(sourceHandlers, a)
				}
			}
			return nil
		})
	crash := fs.Duration("crash-timeout", 12*time.Minute, "Replay events whose root span did not arrive within this; keep it above the source handler's lease-stale-after.")
	limit := fs.Int("replay-limit", 3, "Replays pharos asks for per event.")
	backoff := fs.Duration("replay-backoff", 30*time.Second, "Wait after the first replay of an event; doubles per replay.")
	backoffMax := fs.Duration("replay-backoff-max", 10*time.Minute, "Longest wait between replays of one event.")
	rootWait := fs.Duration("root-wait", 30*time.Second, "How long a failed stage span waits for the event's root span (the source handler releases its leases before ending it) before the replay.")
	retention := fs.Duration("retention", time.Hour, "How long finished events are remembered.")
	state := fs.String("state-configmap", "", "namespace/name of the ConfigMap keeping the tracked events; empty keeps them in memory (lost on restart).")
	metricsAddr := fs.String("metrics-bind-address", ":9090", "Where Prometheus metrics are served; 0 disables.")
	logLevel := fs.String("log-level", "info", "Log verbosity: debug, info, error, or a number.")
	tokenFile := fs.String("stage-token-file", "", "Projected ServiceAccount token (audience "+stage.Audience+
		") sent with every Replay call to the source handler.")
	callers := fs.String("stage-callers", "", "Comma-separated namespaces whose stage ServiceAccounts (katastroma-*, the "+
		"collector's katastroma-otel-collector among them) may export spans; set, both OTLP ports need their token (TokenReview).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger, ctx, stop, err := startProcess(*logLevel)
	if err != nil {
		return err
	}
	defer stop()

	o := pharos.Options{GRPCAddr: *grpcAddr, HTTPAddr: *httpAddr, MaxBodyBytes: *maxBody, Logger: logger,
		SourceHandlers: sourceHandlers,
		Config: pharos.Config{CrashTimeout: *crash, ReplayLimit: *limit, BackoffBase: *backoff,
			BackoffMax: *backoffMax, Retention: *retention, DefaultAddress: *source, RootWait: *rootWait}}
	o.Dial = func(addr string) (*grpc.ClientConn, error) {
		return stage.DialWith(addr, stage.Connection{TokenFile: *tokenFile})
	}
	if *callers != "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("loading the kubeconfig: %w", err)
		}
		if o.Auth, err = stageAuth(cfg, operator.NewScheme(), *callers, false); err != nil {
			return err
		}
	}
	if *state != "" {
		ns, name, ok := strings.Cut(*state, "/")
		if !ok || ns == "" || name == "" {
			return fmt.Errorf("--state-configmap %q: want namespace/name", *state)
		}
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("loading the kubeconfig: %w", err)
		}
		c, err := client.New(cfg, client.Options{Scheme: operator.NewScheme()})
		if err != nil {
			return err
		}
		o.Persister = &pharos.ConfigMapPersister{Client: c, Key: types.NamespacedName{Namespace: ns, Name: name}}
	}
	if *metricsAddr != "0" {
		lis, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}),
			ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer func() { _ = srv.Close() }()
	}
	p, err := pharos.Start(ctx, o)
	if err != nil {
		return err
	}
	return p.Wait()
}
