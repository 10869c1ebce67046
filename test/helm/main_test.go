// Package helm tests charts/quartet-operator with the Helm v4 SDK: lint, rendering with default and non-default
// values, every rendered object through server-side dry-run on the cluster-grade control plane, and an install,
// upgrade and uninstall of the chart. The chart's own CRDs and webhooks are left out of the control plane
// (WithoutOperator), so what the test sees is what the chart installs; so are cert-manager and the Prometheus
// Operator, because the default install must need neither. The dry-run test installs their CRDs for its own
// duration.
package helm

import (
	"fmt"
	"os"
	"testing"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/asinstalled"
)

var env *testenv.Env

// installed is what the chart creates for the manager, as the install test runs it.
var installed = asinstalled.Install{
	Namespace:      releaseNamespace,
	Deployment:     "quartet-operator-controller-manager",
	ServiceAccount: "quartet-operator-controller-manager",
	WebhookService: "quartet-operator-webhook-service",
	CertSecret:     "quartet-webhook-tls",
	Inventory:      "helm-test",
}

// auditPolicy records every request of the manager's ServiceAccount at Metadata level (the response code is what
// the test reads) and nothing else.
var auditPolicy = fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [%q]
- level: None
`, installed.User())

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{
		WithoutOperator:       true,
		WithoutMonitoringCRDs: true,
		Cluster:               &testenv.ClusterOptions{AuditPolicy: auditPolicy},
	}))
}
