package fleet_test

import (
	"context"
	"testing"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/discovery"
)

func TestCollectorDiscoveryCreatesCollectorsAndPrunes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	tag := map[string]string{"suite": ns}
	put := func(id string, inactive bool) {
		c := &collectorv1.Collector{Id: id, LocalAttributes: tag}
		if inactive {
			c.MarkedInactiveAt = timestamppb.Now()
		}
		srv.PutCollector(c)
		t.Cleanup(func() { srv.RemoveCollector(id) })
	}
	put(ns+"-edge-1", false)
	put(ns+"-Edge_2", false)
	put(ns+"-edge-3", true)
	put(ns+"-edge-9", false)
	srv.PutCollector(&collectorv1.Collector{Id: ns + "-other"}) // not selected
	t.Cleanup(func() { srv.RemoveCollector(ns + "-other") })
	// A Collector nobody discovered already has the name derived for edge-9.
	g.Expect(env.Client.Create(ctx, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ns + "-edge-9"},
		Spec: fleetv1alpha1.CollectorSpec{ID: ns + "-edge-9"}})).To(Succeed())

	srv.ResetCalls()
	d := &fleetv1alpha1.CollectorDiscovery{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: fleetv1alpha1.CollectorDiscoverySpec{
			Selector: fleetv1alpha1.PolicySelector{Matchers: []string{`suite="` + ns + `"`}},
			Policy:   fleetv1alpha1.CollectorDiscoveryPolicy{OnCollectorRemoved: fleetv1alpha1.RemovalDelete},
		}}
	g.Expect(env.Client.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(ctx, d) })
	get := func(g Gomega) *fleetv1alpha1.CollectorDiscovery {
		got := &fleetv1alpha1.CollectorDiscovery{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(d), got)).To(Succeed())
		return got
	}
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(got.Status.CollectorsObserved).To(BeEquivalentTo(3), "the inactive collector is left out")
		g.Expect(got.Status.CollectorsManaged).To(BeEquivalentTo(2))
		g.Expect(got.Status.Conflicts).To(ConsistOf(fleetv1alpha1.CollectorDiscoveryConflict{CollectorID: ns + "-edge-9",
			CRName: ns + "-edge-9", Reason: fleetv1alpha1.ConflictNotOwnedByDiscovery,
			Message: `"` + ns + `-edge-9" exists and was not created by a discovery; it is left alone`}))
	}).Should(Succeed())
	// Only the matchers were sent to Fleet.
	lists := srv.CallsTo("ListCollectors")
	g.Expect(lists).NotTo(BeEmpty())
	g.Expect(lists[0].Request.(*collectorv1.ListCollectorsRequest).GetMatchers()).To(Equal([]string{`suite="` + ns + `"`}))
	g.Expect(metricValue(g, "fleet_discovery_list_collectors_result_size", map[string]string{"namespace": ns, "name": "edge"})).To(BeEquivalentTo(4))

	// The created Collectors carry the discovery's marks and the Collector controller finds them registered.
	edge2 := client.ObjectKey{Namespace: ns, Name: discovery.CollectorCRName(ns + "-Edge_2")}
	g.Expect(edge2.Name).To(MatchRegexp(`^` + ns + `-edge-2-[0-9a-f]{5}$`))
	g.Eventually(func(g Gomega) {
		c := collectorReady(g, edge2)
		g.Expect(c.Spec.ID).To(Equal(ns + "-Edge_2"))
		g.Expect(c.Status.Registered).To(BeTrue())
		g.Expect(c.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationDiscoveredBy, ns+"/edge"))
		g.Expect(c.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationFleetCollectorID, ns+"-Edge_2"))
		g.Expect(c.Labels).To(HaveKeyWithValue(fleetv1alpha1.LabelDiscoveryName, "edge"))
		g.Expect(c.Labels).To(HaveKeyWithValue(fleetv1alpha1.LabelDiscoveryNamespace, ns))
	}).Should(Succeed())

	// edge-1 leaves Fleet and inactive collectors are now wanted: one CR is pruned, one created.
	srv.RemoveCollector(ns + "-edge-1")
	g.Eventually(func(g Gomega) {
		cur := get(g)
		cur.Spec.IncludeInactive = true
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-edge-1"}, &fleetv1alpha1.Collector{}))).To(BeTrue())
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-edge-3"}, &fleetv1alpha1.Collector{})).To(Succeed())
		got := get(g)
		g.Expect(got.Status.CollectorsObserved).To(BeEquivalentTo(3))
		g.Expect(got.Status.CollectorsManaged).To(BeEquivalentTo(2))
		g.Expect(eventReasons(g, ns, "edge")).To(ContainElements("Discovered", "Pruned", "Conflict"))
	}).Should(Succeed())

	// Leaving the selection is not leaving Fleet: edge-2 loses the matched attribute and inactive collectors are
	// unwanted again. Deleting their CRs would strip what they write from live collectors, so both stay, stale.
	srv.PutCollector(&collectorv1.Collector{Id: ns + "-Edge_2"})
	g.Eventually(func(g Gomega) {
		cur := get(g)
		cur.Spec.IncludeInactive = false
		g.Expect(env.Client.Update(ctx, cur)).To(Succeed())
	}).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.StaleCollectors).To(BeEquivalentTo(2))
		g.Expect(got.Status.CollectorsManaged).To(BeEquivalentTo(2))
		for _, key := range []client.ObjectKey{edge2, {Namespace: ns, Name: ns + "-edge-3"}} {
			c := &fleetv1alpha1.Collector{}
			g.Expect(env.Client.Get(ctx, key, c)).To(Succeed(), "%s left the selection but is still in Fleet", key.Name)
			g.Expect(c.DeletionTimestamp.IsZero()).To(BeTrue())
			g.Expect(c.Annotations).To(HaveKeyWithValue(fleetv1alpha1.AnnotationDiscoveryStale, "true"))
		}
		g.Expect(eventReasons(g, ns, "edge")).To(ContainElement("Stale"))
	}).Should(Succeed())

	// The pre-existing Collector was never touched.
	c := &fleetv1alpha1.Collector{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: ns + "-edge-9"}, c)).To(Succeed())
	g.Expect(c.Annotations).NotTo(HaveKey(fleetv1alpha1.AnnotationDiscoveredBy))
}
