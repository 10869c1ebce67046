package gnmic_test

import (
	"net/netip"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/devdial"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// env is the control plane shared by every test in this package, with the gnmic controllers running and the
// webhooks served through the API server.
var env *testenv.Env

// dialMap is the manager's map of in-cluster peer addresses to local ones: each test adds the pod addresses
// of its Clusters, served by collector test servers on loopback (see cluster).
var dialMap = &devdial.Map{}

// fakeClock is the clock injected into the controllers that accept one (the TargetSource controller): its
// status timestamps and backoff arithmetic are exact, and runs that change nothing write nothing.
var fakeClock = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))

// certificateWait is the manager's --gnmic-certificate-wait in these tests.
const certificateWait = 8 * time.Second

// targetTLSPropagation is the manager's --gnmic-target-tls-propagation in these tests: long enough to see a
// target held back, short enough to see it pushed.
const targetTLSPropagation = 5 * time.Second

func TestMain(m *testing.M) {
	// No container runs in the simulated collector pods. The variable's pattern sends every pod address to
	// loopback on the same port (a test server on the Cluster's REST port); exact entries for the tests'
	// Clusters are added to dialMap, and win.
	_ = os.Setenv("QUARTET_DEV_DIAL_MAP", "*.svc.cluster.local:*=127.0.0.1")
	os.Exit(testenv.Main(m, &env, testenv.Options{
		// Collector tests want quick health follow-up.
		Manager: func(o *manager.Options) {
			o.GNMIcPollInterval, o.GNMIcReconnectBackoff = time.Second, 100*time.Millisecond
			o.DevDialMap = dialMap
			// Long enough for a test to see CertificatePending, short enough to see the deadline pass.
			o.GNMIcCertificateWait = certificateWait
			o.GNMIcTargetTLSPropagation = targetTLSPropagation
			// The inventories of these tests are httptest servers on 127.0.0.1; every other loopback address
			// (127.0.0.2 …) stays blocked, which the SSRF test relies on.
			o.SSRFAllowForTesting = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		},
		// cert-manager's Certificate, Issuer and ClusterIssuer, generated from its Go types by `make envtest`.
		ExtraCRDPaths: []string{testenv.CertManagerCRDDir()},
		Controllers: []string{gnmic.TargetControllerName, gnmic.TargetProfileControllerName, gnmic.TargetSourceControllerName,
			gnmic.ClusterControllerName, gnmic.PipelineControllerName, gnmic.CollectorResourceControllerName},
		Clock: fakeClock,
		// Cluster mode: collector StatefulSets become Ready through the real controllers, Targets are
		// garbage-collected with their TargetSource. CrashLoopStage lets a test make a collector pod unready by
		// labelling it, as a crashing container would.
		Cluster: &testenv.ClusterOptions{ExtraStages: []byte(testenv.CrashLoopStage)},
	}))
}
