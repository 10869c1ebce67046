package agentrax_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
)

// TestGrowingUpdateRacingAStaleReservationNeverOverAdmits is the barrier race of a growing update on the cluster,
// interleaved exactly: agent a shrank from 10 to 5 replicas but its reservation still holds 10. A TenantQuota
// reconciler reads the quota and a's spec (5) and decides to lower the reservation to 5; just before its status
// patch reaches the API server, a grows back to 8 through the real admission webhook (the stale 10 covers it).
// If that update wrote nothing, the patch would land: a would hold 5 while it may run 8, and an agent b of 7 would
// fit the quota of 12 that a and b then overrun (15). The growing update writes the ledger, so the reconciler's
// patch conflicts, and b is refused. The reconciler under test is a second instance driven by the test, so that
// its status patch can be held at the exact point.
func TestGrowingUpdateRacingAStaleReservationNeverOverAdmits(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, tenantQuota(ns, "q", 5, 0, 12, 10))).To(Succeed())
	g.Expect(env.Client.Create(ctx, agentDeployment(ns, "a", "q", 1, 10, 0))).To(Succeed())
	g.Expect(updateAgent(ns, "a", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 5 })).To(Succeed())
	// The reservation is made an hour old, as one past the settle grace is: the growing update's fresh
	// reservedAt then differs from it, so its barrier write is a real write. (The manager's own TenantQuota
	// controller reacts to this edit after its 1 s usage delay; the race below is staged well within it.)
	stale := metav1.NewTime(time.Now().Add(-time.Hour))
	g.Eventually(func(g Gomega) {
		tq := getQuota(g, ns, "q")
		before := tq.DeepCopy()
		tq.Status.Ledger = quota.FormatLedger([]agentraxv1alpha1.Reservation{{Name: "a", Replicas: 10, ReservedAt: stale}})
		g.Expect(env.Client.Status().Patch(ctx, tq, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))).To(Succeed())
	}).Should(Succeed(), "the TenantQuota controller writes the status too: retried on conflict")

	var raced atomic.Bool
	var patchErr error
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	c := interceptor.NewClient(direct, interceptor.Funcs{
		// The manager's field index on spec.tenantRef is not the API server's: list the namespace and filter.
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, _ ...client.ListOption) error {
			ads, ok := list.(*agentraxv1alpha1.AgentDeploymentList)
			if !ok {
				return c.List(ctx, list)
			}
			if err := c.List(ctx, ads, client.InNamespace(ns)); err != nil {
				return err
			}
			kept := ads.Items[:0]
			for _, ad := range ads.Items {
				if ad.Spec.TenantRef == "q" {
					kept = append(kept, ad)
				}
			}
			ads.Items = kept
			return nil
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if tq, ok := obj.(*agentraxv1alpha1.TenantQuota); ok && !raced.Swap(true) {
				g.Expect(tq.Status.Ledger).To(HavePrefix("a=5/0@"), "the reconciler is about to lower a's reservation to 5")
				g.Expect(updateAgent(ns, "a", func(ad *agentraxv1alpha1.AgentDeployment) { ad.Spec.Replicas.Max = 8 })).To(Succeed())
				patchErr = c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				return patchErr
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	r := &agentrax.TenantQuotaReconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10),
		GPUResource: "nvidia.com/gpu", SettleGrace: time.Nanosecond}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "q"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raced.Load()).To(BeTrue(), "the reconciler wrote the quota")
	t.Logf("after the race: patch error %v, ledger %q", patchErr, getQuota(g, ns, "q").Status.Ledger)
	err = env.Client.Create(ctx, agentDeployment(ns, "b", "q", 1, 7, 0))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a may run 8 (10 reserved) + 7 > 12: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("maxTotalReplicas"))
	g.Expect(apierrors.IsConflict(patchErr)).To(BeTrue(), "the growing update moved the ledger under the reconciler: %v", patchErr)
}
