package fleet_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/fleetserver"
)

// collectorWebhook is the validating webhook that refuses a second claim on a collector ID.
const collectorWebhook = "vcollector-v1alpha1.fleetmanagement.grafana.com"

// bypassLabel marks the objects the Collector webhook is not called for while bypassCollectorWebhook is on.
const bypassLabel = "test.quartet.dev/collector-webhook-down"

// bypassCollectorWebhook makes the API server admit Collectors labelled bypassLabel without calling the Collector
// webhook, as it does for every Collector while the webhook configuration is not installed yet (or was removed
// during an upgrade). Only labelled objects are affected, so tests running beside this one keep the webhook. The
// configuration is restored when the test ends.
func bypassCollectorWebhook(t *testing.T, g Gomega, ns string) {
	t.Helper()
	ctx := context.Background()
	set := func(sel *metav1.LabelSelector) {
		g.Eventually(func(g Gomega) {
			configs := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
			g.Expect(env.Client.List(ctx, configs)).To(Succeed())
			found := false
			for i := range configs.Items {
				for j := range configs.Items[i].Webhooks {
					if configs.Items[i].Webhooks[j].Name == collectorWebhook {
						found = true
						configs.Items[i].Webhooks[j].ObjectSelector = sel
						g.Expect(env.Client.Update(ctx, &configs.Items[i])).To(Succeed())
					}
				}
			}
			g.Expect(found).To(BeTrue(), "the test environment installs the Collector webhook")
		}).Should(Succeed())
	}
	set(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: bypassLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}})
	t.Cleanup(func() { set(&metav1.LabelSelector{}) })

	// The API server reloads webhook configurations asynchronously: wait until a labelled duplicate claim is
	// admitted (dry run, so nothing is stored).
	probeID := ns + "-webhook-probe"
	holder := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook-probe"},
		Spec: fleetv1alpha1.CollectorSpec{ID: probeID}}
	g.Expect(env.Client.Create(ctx, holder)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), holder) })
	g.Eventually(func() error {
		dup := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "webhook-probe-dup",
			Labels: map[string]string{bypassLabel: "true"}}, Spec: fleetv1alpha1.CollectorSpec{ID: probeID}}
		return env.Client.Create(ctx, dup, client.DryRunAll)
	}).Should(Succeed())
}

// Two Collectors that claim one collector ID can exist when the webhook was not running at admission: the older
// holds the ID and syncs, the other reports Conflicted, makes no Fleet call, and takes over once the holder is
// gone.
func TestTwoCollectorsAdmittedWithoutTheWebhookTheYoungerIsConflicted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bypassCollectorWebhook(t, g, ns)
	id := ns + "-doubly-claimed"
	srv.PutCollector(&collectorv1.Collector{Id: id, Name: "doubly", CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY})
	t.Cleanup(func() { srv.RemoveCollector(id) })

	first := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first",
		Labels: map[string]string{bypassLabel: "true"}},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"team": "a"}}}
	g.Expect(env.Client.Create(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := collectorReady(g, client.ObjectKeyFromObject(first))
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.ConditionConflicted)).To(BeTrue())
	}).Should(Succeed())
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("team", "a"))

	// Creation timestamps have one-second resolution; within one second the tie-break by namespace/name also
	// makes "first" the holder, so the outcome does not depend on timing.
	second := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "second",
		Labels: map[string]string{bypassLabel: "true"}},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"team": "b"}}}
	g.Expect(env.Client.Create(ctx, second)).To(Succeed(), "admitted: the webhook is not called for it")
	secondKey := client.ObjectKeyFromObject(second)

	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.Collector{}
		g.Expect(env.Client.Get(ctx, secondKey, got)).To(Succeed())
		conflicted := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionConflicted)
		g.Expect(conflicted).NotTo(BeNil(), "conditions: %v", got.Status.Conditions)
		g.Expect(conflicted.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(conflicted.Reason).To(Equal(fleetv1alpha1.ReasonIDClaimed))
		g.Expect(conflicted.Message).To(ContainSubstring("held by Collector " + ns + "/first"))
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(eventReasons(g, ns, "second")).To(ContainElement(fleetv1alpha1.ConditionConflicted))
	}).Should(Succeed())
	// The holder is untouched: still synced, not conflicted, and Fleet keeps its value.
	g.Consistently(func(g Gomega) {
		got := collectorReady(g, client.ObjectKeyFromObject(first))
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.ConditionConflicted)).To(BeTrue())
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("team", "a"))
	}, 2*time.Second).Should(Succeed())

	// Deleting the holder frees the ID: the conflicted Collector looks again (within its 30s requeue) and syncs.
	g.Expect(env.Client.Delete(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := collectorReady(g, secondKey)
		g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, fleetv1alpha1.ConditionConflicted)).To(BeTrue())
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(HaveKeyWithValue("team", "b"))
	}, 2*time.Minute).Should(Succeed())
}

// The hand-off of a collector ID: the holder is deleted while its finalizer cannot remove its keys (Fleet answers
// 503), a second Collector of that ID takes over and claims one of those keys with the same value (nothing to
// write, so Fleet already holds what it wants). When the finalizer's removal finally goes through it removes only
// the key nobody took over, never the new holder's.
func TestCollectorHandOffNeverStripsTheNewHoldersKeys(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bypassCollectorWebhook(t, g, ns)
	id := ns + "-handed-over"
	srv.PutCollector(&collectorv1.Collector{Id: id, Name: "handed", CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY})
	t.Cleanup(func() { srv.RemoveCollector(id) })

	old := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old", Labels: map[string]string{bypassLabel: "true"}},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"team": "a", "rack": "r1"}}}
	g.Expect(env.Client.Create(ctx, old)).To(Succeed())
	oldKey := client.ObjectKeyFromObject(old)
	g.Eventually(func(g Gomega) { collectorReady(g, oldKey) }).Should(Succeed())
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{"team": "a", "rack": "r1"}))

	srv.InjectFault(fleetserver.Fault{Method: "BulkUpdateCollectors", Code: connect.CodeUnavailable})
	t.Cleanup(srv.ClearFaults)
	g.Expect(env.Client.Delete(ctx, old)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.Collector{}
		g.Expect(env.Client.Get(ctx, oldKey, got)).To(Succeed())
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonDeleteFailed))
	}).Should(Succeed())

	successor := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "successor", Labels: map[string]string{bypassLabel: "true"}},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"team": "a"}}}
	g.Expect(env.Client.Create(ctx, successor)).To(Succeed())
	successorKey := client.ObjectKeyFromObject(successor)
	g.Eventually(func(g Gomega) {
		got := collectorReady(g, successorKey)
		g.Expect(got.Status.AttributeOwners).To(ContainElement(HaveField("Key", "team")))
	}).Should(Succeed())

	// Fleet recovers: the retrying finalizer removes what only the old holder owned, then lets go.
	srv.ClearFaults()
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, oldKey, &fleetv1alpha1.Collector{}))
	}, time.Minute).Should(BeTrue())
	g.Consistently(func(g Gomega) {
		g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{"team": "a"}), "rack removed, team kept")
	}, 2*time.Second).Should(Succeed())
	collectorReady(g, successorKey)
}
