// Package e2e runs the whole gitops pipeline against a real API server (envtest), a real git repository served by
// `git daemon` on loopback and signed GitHub push payloads.
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/runner"
	"github.com/quartet-dev/quartet-operator/internal/gitops/source"
	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var (
	env      *testenv.Env
	gitd     *gitServer
	pipe     *runner.Pipeline
	spans    *tracetest.InMemoryExporter
	hookFunc atomic.Pointer[func(source.Target, string)]
	// batchHook runs in the provisioner before each write batch's lease check.
	batchHook atomic.Pointer[func(pipeline.Context, schema.GroupKind)]
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	gomega.SetDefaultEventuallyTimeout(60 * time.Second)
	gomega.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	e, err := testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	env = e
	defer func() { _ = e.Stop() }()
	teardown, err := setup(e)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setup:", err)
		return 1
	}
	defer teardown()
	return m.Run()
}

// setup runs after the control plane started and returns a teardown.
func setup(e *testenv.Env) (func(), error) {
	spans = tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	var err error
	if gitd, err = startGitDaemon(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	pipe, err = runner.StartAll(ctx, runner.Options{HTTPAddr: "127.0.0.1:0", Config: e.Config,
		Scheme: operator.NewScheme(), ReconcileTick: 200 * time.Millisecond,
		// The test git daemon serves on loopback, which the fetch guard refuses unless told otherwise.
		RepositoryAllowForTesting: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, BeforeStream: func(t source.Target, lease string) {
			if f := hookFunc.Load(); f != nil {
				(*f)(t, lease)
			}
		}, BeforeBatch: func(pc pipeline.Context, gk schema.GroupKind) {
			if f := batchHook.Load(); f != nil {
				(*f)(pc, gk)
			}
		}})
	if err != nil {
		cancel()
		gitd.stop()
		return nil, fmt.Errorf("starting the pipeline: %w", err)
	}
	return func() {
		cancel()
		_ = pipe.Wait()
		gitd.stop()
	}, nil
}
