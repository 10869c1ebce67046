// Package olm installs the operator the way users do: OLM's own olm and catalog operators (built from
// operator-lifecycle-manager) install the bundle from an offline rendering of the catalog served by opm, on the
// cluster-grade control plane; then the manager binary runs as installed, with the ServiceAccount OLM created, the
// serving certificate OLM generated and the environment OLM wrote into its Deployment, and drives the samples to
// their steady state. The API server's audit log must show no forbidden answer to that ServiceAccount.
package olm

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/testenv"
	"github.com/quartet-dev/quartet-operator/internal/testenv/olminstall"
)

// Where OLM installs the operator, and the names the bundle gives it.
const (
	installNamespace = olminstall.Namespace
	packageName      = olminstall.PackageName
	channelName      = olminstall.ChannelName
	deploymentName   = olminstall.DeploymentName
	serviceAccount   = olminstall.ServiceAccount
)

// managerUser is the user name the API server gives the manager's ServiceAccount.
var managerUser = installed.User()

// auditPolicy records every request of the manager's ServiceAccount at Metadata level (the response code is what
// the test reads) and nothing else.
var auditPolicy = fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [%q]
- level: None
`, managerUser)

var (
	env *testenv.Env
	// olmClient reads and writes OLM's kinds besides the operator's own, as the cluster administrator.
	olmClient client.Client
	// olmDir holds OLM's binaries and CRDs (`make olm`).
	olmDir string
)

func TestMain(m *testing.M) {
	dir, err := olminstall.Binaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, "olm:", err)
		os.Exit(1)
	}
	olmDir = dir
	os.Exit(testenv.Main(m, &env, testenv.Options{
		WithoutOperator: true,
		// As on OperatorHub.io's kind cluster: no Prometheus Operator. The bundle must install anyway (the manager
		// creates its monitoring objects only where those CRDs are served, internal/monitoring).
		WithoutMonitoringCRDs: true,
		ExtraCRDPaths:         []string{olminstall.CRDs(olmDir)},
		Cluster:               &testenv.ClusterOptions{AuditPolicy: auditPolicy},
	}))
}
