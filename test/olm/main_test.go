// Package olm installs the operator the way users do: OLM's own olm and catalog operators (built from
// operator-lifecycle-manager) install the bundle from an offline rendering of the catalog served by opm, on the
// cluster-grade control plane; then the manager binary runs as installed, with the ServiceAccount OLM created, the
// serving certificate OLM generated and the environment OLM wrote into its Deployment, and drives the samples to
// their steady state. The API server's audit log must show no forbidden answer to that ServiceAccount.
package olm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/operator"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// Where OLM installs the operator, and the names the bundle gives it.
const (
	installNamespace = "quartet-operator"
	packageName      = "quartet-operator"
	channelName      = "candidate"
	deploymentName   = "quartet-operator-controller-manager"
	serviceAccount   = "quartet-operator-controller-manager"
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
	dir, err := olmBinaries()
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
		ExtraCRDPaths:         []string{filepath.Join(olmDir, "crds")},
		Cluster:               &testenv.ClusterOptions{AuditPolicy: auditPolicy},
	}))
}

// olmBinaries finds `make olm`'s output: bin/olm, then the cache. A missing build fails the package, never skips it.
func olmBinaries() (string, error) {
	for _, dir := range []string{
		filepath.Join(testenv.RepoRoot(), "bin", "olm"),
		filepath.Join(testenv.CacheDir(), "olm", "v0.42.0"),
	} {
		if _, err := os.Stat(filepath.Join(dir, ".done")); err == nil {
			return dir, nil
		}
	}
	return "", errors.New("OLM's olm and catalog binaries are not built: run `make olm` (make test does)")
}

// newOLMClient is an administrator's client that also knows OLM's kinds.
func newOLMClient() (client.Client, error) {
	scheme := operator.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{operatorsv1alpha1.AddToScheme, operatorsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(env.Config, client.Options{Scheme: scheme})
}
