package agentrax_test

import (
	"context"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
)

// A phase that fails with a transient API error makes Reconcile return that error after the status is written, so
// controller-runtime retries it with backoff; the retry succeeds without any other event.
func TestFailedPhaseIsReturnedForARetry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 20, 10))).To(Succeed())
	ad := agentDeployment(ns, "flaky", "q", 1, 2, 0)
	g.Expect(env.Client.Create(ctx, ad)).To(Succeed())
	key := client.ObjectKeyFromObject(ad)
	g.Eventually(func() error { return env.Client.Get(ctx, key, &corev1.Service{}) }).Should(Succeed())

	// The reconciler under test reads through a client whose next read of the agent's Service times out.
	var failures atomic.Int32
	failures.Store(1)
	var patchedReason atomic.Value // the Reconciled reason of the last status patch this reconciler wrote
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	flaky := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if a, ok := obj.(*agentraxv1alpha1.AgentDeployment); ok {
				if cond := meta.FindStatusCondition(a.Status.Conditions, agentraxv1alpha1.ConditionReconciled); cond != nil {
					patchedReason.Store(cond.Reason)
				}
			}
			return nil
		},
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Service); ok && k == key && failures.Add(-1) >= 0 {
				return apierrors.NewTimeoutError("injected: reading the Service timed out", 1)
			}
			return c.Get(ctx, k, obj, opts...)
		},
	})
	r := &agentrax.AgentDeploymentReconciler{Client: flaky, Recorder: events.NewFakeRecorder(10),
		Registrar: &recorded{recordingRegistrar: registrar}, GPUResource: "nvidia.com/gpu"}

	// The manager's own reconciler works on the same agent meanwhile (the Deployment rolls out), so a status patch
	// of this one may be refused as a conflict (it carries a resourceVersion precondition); such a pass is tried
	// again, as controller-runtime would.
	g.Eventually(func(g Gomega) {
		failures.Store(1)
		patchedReason.Store("")
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		g.Expect(err).To(MatchError(ContainSubstring("injected")), "the phase's error is returned for a rate-limited retry")
		g.Expect(patchedReason.Load()).To(Equal(agentraxv1alpha1.ReasonReconcileFailed), "the status was written before returning")
	}).Should(Succeed())

	g.Eventually(func() error {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key})
		if err != nil && !apierrors.IsConflict(err) {
			return StopTrying("the retry failed").Wrap(err)
		}
		return err
	}).Should(Succeed(), "the retry succeeds")
}
