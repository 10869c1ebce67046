package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/fleet"
	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// blindCache answers reads of the kinds discoveries create as a cache that has not seen them yet; everything
// else, and every write, goes to the API server.
type blindCache struct{ client.Client }

func (c blindCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	switch obj.(type) {
	case *fleetv1alpha1.Pipeline:
		return apierrors.NewNotFound(schema.GroupResource{Group: fleetv1alpha1.GroupVersion.Group, Resource: "pipelines"}, key.Name)
	case *fleetv1alpha1.Collector:
		return apierrors.NewNotFound(schema.GroupResource{Group: fleetv1alpha1.GroupVersion.Group, Resource: "collectors"}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c blindCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *fleetv1alpha1.PipelineList, *fleetv1alpha1.CollectorList:
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// wiringManager is a manager whose cached client is blind to the CRs discoveries create, and which keeps the
// controllers set up on it instead of running them, so a test reconciles through exactly what the operator's
// wiring (internal/operator) built.
type wiringManager struct {
	manager.Manager
	added []manager.Runnable
}

func (m *wiringManager) GetClient() client.Client { return blindCache{env.Client} }

func (m *wiringManager) GetAPIReader() client.Reader { return env.Client }

func (m *wiringManager) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return nil
}

// wiredReconciler sets the named controller up through operator.Controllers(), with the suite's Fleet settings,
// and returns the reconciler the wiring registered.
func wiredReconciler(t *testing.T, g Gomega, name string) reconcile.Reconciler {
	t.Helper()
	base, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme: env.Client.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// The suite's manager already registered these controller names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	mgr := &wiringManager{Manager: base}
	deps := operator.Dependencies{Fleet: operator.FleetSettings{CredentialsSecret: "fleet-system/fleet-credentials",
		RPS: testRPS, Burst: testBurst}}
	for _, c := range operator.Controllers() {
		if c.Name == name {
			g.Expect(c.Setup(context.Background(), mgr, deps)).To(Succeed())
		}
	}
	for _, r := range mgr.added {
		if rec, ok := r.(reconcile.Reconciler); ok {
			return rec
		}
	}
	t.Fatalf("the wiring of %s registered no controller", name)
	return nil
}

// reconcileOnce runs one reconcile, turning a panic the controller does not recover into an error.
func reconcileOnce(r reconcile.Reconciler, key client.ObjectKey) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	_, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	return err
}

// Both discoveries read the API server when a create finds the CR already there (their cache has not seen it
// yet). The reader is whatever internal/operator wires in, so this goes through the operator's wiring.
func TestDiscoveryWiringReadsTheAPIServerWhenACreateFindsTheCR(t *testing.T) {
	t.Run("PipelineDiscovery", func(t *testing.T) {
		g := NewWithT(t)
		dKey := readOnlyDiscoveryOfOne(t, g, newNamespace(t), "wired")

		r := wiredReconciler(t, g, fleet.PipelineDiscoveryControllerName)
		repoll(g, dKey, 2*time.Minute)
		g.Expect(reconcileOnce(r, dKey)).To(Succeed())
		got := pipelineDiscovery(g, dKey)
		g.Expect(got.Status.Conflicts).To(BeEmpty(), "its own CR is no conflict")
		g.Expect(got.Status.PipelinesManaged).To(BeEquivalentTo(1))
	})

	t.Run("CollectorDiscovery", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		ns := newNamespace(t)
		id := ns + "-wired"
		srv.PutCollector(&collectorv1.Collector{Id: id, LocalAttributes: map[string]string{"suite": ns}})
		t.Cleanup(func() { srv.RemoveCollector(id) })
		d := &fleetv1alpha1.CollectorDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wired"},
			Spec: fleetv1alpha1.CollectorDiscoverySpec{
				Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`suite="` + ns + `"`}}}}
		g.Expect(env.Client.Create(ctx, d)).To(Succeed())
		t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
		dKey := client.ObjectKeyFromObject(d)
		get := func(g Gomega) *fleetv1alpha1.CollectorDiscovery {
			got := &fleetv1alpha1.CollectorDiscovery{}
			g.Expect(env.Client.Get(ctx, dKey, got)).To(Succeed())
			return got
		}
		g.Eventually(func(g Gomega) {
			g.Expect(get(g).Status.CollectorsManaged).To(BeEquivalentTo(1))
		}).Should(Succeed())

		r := wiredReconciler(t, g, fleet.CollectorDiscoveryControllerName)
		g.Eventually(func() error { // a spec change makes the next poll due at once
			cur := &fleetv1alpha1.CollectorDiscovery{}
			if err := env.Client.Get(ctx, dKey, cur); err != nil {
				return err
			}
			cur.Spec.PollInterval = &metav1.Duration{Duration: 2 * time.Minute}
			return env.Client.Update(ctx, cur)
		}).Should(Succeed())
		g.Expect(reconcileOnce(r, dKey)).To(Succeed())
		got := get(g)
		g.Expect(got.Status.Conflicts).To(BeEmpty(), "its own CR is no conflict")
		g.Expect(got.Status.CollectorsManaged).To(BeEquivalentTo(1))
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
	})
}
