package gitops_test

import (
	"os"
	"testing"

	"github.com/quartet-dev/quartet-operator/controllers/gitops"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// env is the control plane shared by the package's tests: the gitops controllers run and their webhooks are
// served through the API server.
var env *testenv.Env

// defaultStageImage is the manager's --katastroma-default-image here, as the installs set it.
const defaultStageImage = "example.com/katastroma:default"

func TestMain(m *testing.M) {
	// Cluster mode: stage Deployments roll out through the real controllers, and deletions cascade.
	os.Exit(testenv.Main(m, &env, testenv.Options{Controllers: []string{gitops.TenantControllerName, gitops.PlatformControllerName},
		Cluster: &testenv.ClusterOptions{},
		Manager: func(o *manager.Options) { o.KatastromaDefaultImage = defaultStageImage }}))
}
