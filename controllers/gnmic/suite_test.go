package gnmic_test

import (
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// env is the control plane shared by every test in this package, with the gnmic controllers running and the
// webhooks served through the API server.
var env *testenv.Env

// fakeClock is the clock injected into the controllers that accept one (the TargetSource controller): its
// status timestamps and backoff arithmetic are exact, and runs that change nothing write nothing.
var fakeClock = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))

func TestMain(m *testing.M) {
	// Collector tests point Clusters at loopback collector test servers and want quick health follow-up.
	_ = os.Setenv("QUARTET_GNMIC_COLLECTOR_URL_OVERRIDE", "true")
	_ = os.Setenv("QUARTET_GNMIC_POLL_INTERVAL", "1s")
	_ = os.Setenv("QUARTET_GNMIC_RECONNECT_BACKOFF", "100ms")
	os.Exit(testenv.Main(m, &env, testenv.Options{
		Controllers: []string{gnmic.TargetControllerName, gnmic.TargetProfileControllerName, gnmic.TargetSourceControllerName,
			gnmic.ClusterControllerName, gnmic.PipelineControllerName},
		Clock: fakeClock,
	}))
}
