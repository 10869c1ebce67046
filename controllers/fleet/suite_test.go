package fleet_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/controllers/fleet"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
	"github.com/quartet-dev/quartet-operator/internal/manager"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// The test manager's Fleet budget: high enough that the suite runs quickly, low enough that the 429 storm test
// can check the limiter holds.
const (
	testRPS   = 50
	testBurst = 20
)

var (
	env *testenv.Env
	// srv is the local Fleet Management server every test talks to, over TLS.
	srv *fleetserver.Server

	secretOnce sync.Once
)

func TestMain(m *testing.M) {
	srv = fleetserver.New("stack-42", "glc_token")
	srv.Start()
	code := testenv.Main(m, &env, testenv.Options{
		Controllers: []string{fleet.PipelineControllerName, fleet.CollectorControllerName,
			fleet.RemoteAttributePolicyControllerName, fleet.ExternalAttributeSyncControllerName,
			fleet.PipelineDiscoveryControllerName, fleet.CollectorDiscoveryControllerName, fleet.TenantPolicyControllerName},
		Manager: func(o *manager.Options) {
			o.FleetCredentialsSecret = "fleet-system/fleet-credentials"
			o.FleetAPIRPS, o.FleetAPIBurst = testRPS, testBurst
			// httptest sources listen on 127.0.0.1; everything else stays blocked (the sync tests prove it).
			o.SSRFAllowForTesting = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			o.SyncTargetRate, o.SyncTargetBurst = 100, 100
			// Both are on for the whole suite: the tests' own requests come from an administrator no TenantPolicy
			// binds, and tenancy_test.go impersonates the users it binds.
			o.EnforceTenantPolicies, o.EnforceCrossNamespaceDiscoveryAuthz = true, true
			// Short, so drift_test.go sees a repair within seconds; one ListPipelines per interval.
			o.FleetDriftInterval = 2 * time.Second
			// Short, so budget_test.go sees several retries of a self-caused NameTaken back off within seconds.
			o.FleetNameTakenRetry = time.Second
		},
	})
	srv.Close()
	os.Exit(code)
}

// credentials creates the Secret the manager reads, once.
func credentials(t *testing.T) {
	t.Helper()
	secretOnce.Do(func() {
		ctx := context.Background()
		g := NewWithT(t)
		g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet-system"}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-system", Name: "fleet-credentials"},
			Data: map[string][]byte{
				fleetclient.SecretKeyBaseURL:  []byte(srv.URL() + "/pipeline.v1.PipelineService/"),
				fleetclient.SecretKeyUsername: []byte("stack-42"),
				fleetclient.SecretKeyPassword: []byte("glc_token"),
				fleetclient.SecretKeyCA:       srv.CAPEM(),
			},
		})).To(Succeed())
	})
}

var namespaceCounter atomic.Int32

// newNamespace creates a namespace of the test's own (and the credentials Secret on first use).
func newNamespace(t *testing.T) string {
	t.Helper()
	credentials(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fleet-%d", namespaceCounter.Add(1))}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// eventReasons lists the reasons of the events recorded about one object.
func eventReasons(g Gomega, ns, name string) []string {
	list := &eventsv1.EventList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}
