// Package health tests the provisioner's health verify on the cluster-grade control plane: kube-controller-manager
// rolls Deployments out and kwok runs their pods, so a Deployment really becomes Available (or does not).
package health

import (
	"os"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var (
	env   *testenv.Env
	spans = tracetest.NewInMemoryExporter()
)

func TestMain(m *testing.M) {
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	os.Exit(testenv.Main(m, &env, testenv.Options{Cluster: &testenv.ClusterOptions{}}))
}
