package agentrax_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/operator"
)

// A phase that fails with a transient API error makes Reconcile return that error after the status is written, so
// controller-runtime's workqueue retries it with backoff; the retry succeeds without any other event. The
// reconciler under test runs in a controller of its own whose watch lets only the agent's first (create) event
// through: a reconciler that swallowed the error would never be called again.
func TestFailedPhaseIsRetriedByTheWorkqueue(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "flaky", "q", 1, 2, 0)
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)
	// Settled first, so the manager's own controller is idle when the one under test starts.
	g.Eventually(func(g Gomega) {
		g.Expect(getAgent(g, key).Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning))
	}).WithTimeout(2 * time.Minute).Should(Succeed())

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 operator.NewScheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())

	// The reconciler reads the API server directly; its first read of the agent's Service times out, and every
	// status patch it writes is recorded.
	var failures atomic.Int32
	failures.Store(1)
	var patchedReasons []string
	var mu sync.Mutex
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: mgr.GetScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	flaky := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Service); ok && k == key && failures.Add(-1) >= 0 {
				return apierrors.NewTimeoutError("injected: reading the Service timed out", 1)
			}
			return c.Get(ctx, k, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if a, ok := obj.(*agentraxv1alpha1.AgentDeployment); ok {
				if cond := meta.FindStatusCondition(a.Status.Conditions, agentraxv1alpha1.ConditionReconciled); cond != nil {
					mu.Lock()
					patchedReasons = append(patchedReasons, cond.Reason)
					mu.Unlock()
				}
			}
			return nil
		},
	})
	inner := &agentrax.AgentDeploymentReconciler{Client: flaky, Recorder: events.NewFakeRecorder(100),
		Registrar: &recorded{recordingRegistrar: registrar}, GPUResource: "nvidia.com/gpu"}
	var results []error
	var admitted atomic.Int32
	onlyTheCreate := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { admitted.Add(1); return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	g.Expect(ctrl.NewControllerManagedBy(mgr).Named("agentrax-retry-under-test").
		For(&agentraxv1alpha1.AgentDeployment{}, builder.WithPredicates(onlyTheCreate)).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			res, err := inner.Reconcile(ctx, req)
			mu.Lock()
			results = append(results, err)
			mu.Unlock()
			return res, err
		}))).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		g.Expect(<-done).To(Succeed())
	})

	// The manager's own controller works on the same agent meanwhile (the Deployment rolls out), so a pass of the
	// one under test may also end in a write conflict; that, too, is an error the workqueue retries.
	g.Eventually(func(g Gomega) {
		mu.Lock()
		defer mu.Unlock()
		g.Expect(results).NotTo(BeEmpty())
		g.Expect(results[0]).To(MatchError(ContainSubstring("injected")), "the phase's error is returned for a rate-limited retry")
		g.Expect(patchedReasons).NotTo(BeEmpty())
		g.Expect(patchedReasons[0]).To(Equal(agentraxv1alpha1.ReasonReconcileFailed), "the status was written before returning")
		g.Expect(results[len(results)-1]).To(Succeed(), "the retry succeeds")
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Expect(admitted.Load()).To(Equal(int32(1)), "no event but the agent's creation reached the controller under test")
}
