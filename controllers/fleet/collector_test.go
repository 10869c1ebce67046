package fleet_test

import (
	"context"
	"testing"

	collectorv1 "github.com/grafana/fleet-management-api/api/gen/proto/go/collector/v1"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

// bulkOps are the recorded BulkUpdateCollectors operations for one collector, as "OP path" strings.
func bulkOps(id string) []string {
	var out []string
	for _, c := range srv.CallsTo("BulkUpdateCollectors") {
		r := c.Request.(*collectorv1.BulkUpdateCollectorsRequest)
		if len(r.GetIds()) != 1 || r.GetIds()[0] != id {
			continue
		}
		for _, op := range r.GetOps() {
			out = append(out, op.GetOp().String()+" "+op.GetPath())
		}
	}
	return out
}

func collectorReady(g Gomega, key client.ObjectKey) *fleetv1alpha1.Collector {
	c := &fleetv1alpha1.Collector{}
	g.Expect(env.Client.Get(context.Background(), key, c)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, fleetv1alpha1.ConditionReady)).To(BeTrue(), "conditions: %v", c.Status.Conditions)
	g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
	return c
}

func TestCollectorAttributesWithSlashAndTildeAreEscapedOnAddAndRemove(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	id := ns + "-edge"
	srv.PutCollector(&collectorv1.Collector{Id: id, Name: "edge", CollectorType: collectorv1.CollectorType_COLLECTOR_TYPE_ALLOY,
		LocalAttributes: map[string]string{"os": "linux"}, RemoteAttributes: map[string]string{"set-in-ui": "keep me"}})

	c := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edge"},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, RemoteAttributes: map[string]string{"rack/slot": "a~1", "team~x": "platform", "env": "prod"}}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := collectorReady(g, client.ObjectKeyFromObject(c))
		g.Expect(got.Status.Registered).To(BeTrue())
		g.Expect(got.Status.CollectorType).To(Equal(fleetv1alpha1.CollectorTypeAlloy))
		g.Expect(got.Status.LocalAttributes).To(HaveKeyWithValue("os", "linux"))
		g.Expect(got.Status.EffectiveRemoteAttributes).To(Equal(c.Spec.RemoteAttributes))
		g.Expect(got.Status.AttributeOwners).To(HaveLen(3))
		g.Expect(got.Finalizers).To(ContainElement(fleetv1alpha1.CollectorFinalizer))
	}).Should(Succeed())
	g.Expect(bulkOps(id)).To(Equal([]string{
		"ADD /remote_attributes/env", "ADD /remote_attributes/rack~1slot", "ADD /remote_attributes/team~0x"}))
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{
		"set-in-ui": "keep me", "env": "prod", "rack/slot": "a~1", "team~x": "platform"}))
	g.Expect(srv.CallsTo("UpdateCollector")).To(BeEmpty(), "name and enabled are not set, so only attributes are written")
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, ns, "edge")).To(ContainElement("AttributesUpdated")) }).Should(Succeed())

	// Dropping a key removes it (escaped); changing one replaces it.
	got := &fleetv1alpha1.Collector{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	got.Spec.RemoteAttributes = map[string]string{"team~x": "platform", "env": "staging"}
	g.Expect(env.Client.Update(ctx, got)).To(Succeed())
	g.Eventually(func() []string { return bulkOps(id) }).Should(HaveLen(5))
	g.Expect(bulkOps(id)[3:]).To(Equal([]string{"REPLACE /remote_attributes/env", "REMOVE /remote_attributes/rack~1slot"}))
	g.Eventually(func(g Gomega) {
		g.Expect(collectorReady(g, client.ObjectKeyFromObject(c)).Status.AttributeOwners).To(HaveLen(2))
	}).Should(Succeed())

	// Deleting the CR removes only the keys it owns.
	g.Expect(env.Client.Delete(ctx, got)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(c), &fleetv1alpha1.Collector{}))
	}).Should(BeTrue())
	g.Expect(bulkOps(id)[5:]).To(Equal([]string{"REMOVE /remote_attributes/env", "REMOVE /remote_attributes/team~0x"}))
	g.Expect(srv.Collector(id).GetRemoteAttributes()).To(Equal(map[string]string{"set-in-ui": "keep me"}))
}

func TestCollectorNameAndEnabledAreApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	id := ns + "-named"
	srv.PutCollector(&collectorv1.Collector{Id: id, Name: "old", Enabled: proto.Bool(true)})
	c := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "named"},
		Spec: fleetv1alpha1.CollectorSpec{ID: id, Name: "Edge 7", Enabled: proto.Bool(false), RemoteAttributes: map[string]string{"env": "prod"}}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := collectorReady(g, client.ObjectKeyFromObject(c))
		g.Expect(got.Status.Name).To(Equal("Edge 7"))
		g.Expect(*got.Status.Enabled).To(BeFalse())
	}).Should(Succeed())
	remote := srv.Collector(id)
	g.Expect(remote.GetName()).To(Equal("Edge 7"))
	g.Expect(remote.GetEnabled()).To(BeFalse())
	g.Expect(remote.GetRemoteAttributes()).To(Equal(map[string]string{"env": "prod"}))
	g.Expect(bulkOps(id)).To(BeEmpty(), "one UpdateCollector carried the attributes too")
}

func TestUnregisteredCollectorIsReportedAndPolled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"},
		Spec: fleetv1alpha1.CollectorSpec{ID: ns + "-ghost"}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleetv1alpha1.Collector{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		g.Expect(got.Status.Registered).To(BeFalse())
		ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(fleetv1alpha1.ReasonNotRegistered))
		g.Expect(eventReasons(g, ns, "ghost")).To(ContainElement(fleetv1alpha1.ReasonNotRegistered))
	}).Should(Succeed())
	// Deleting an unregistered Collector needs no Fleet call.
	g.Expect(env.Client.Delete(ctx, c)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(c), &fleetv1alpha1.Collector{}))
	}).Should(BeTrue())
}

func TestCollectorWebhookRejections(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	long := make([]byte, 1025)
	for i := range long {
		long[i] = 'v'
	}
	for name, tc := range map[string]struct {
		spec     fleetv1alpha1.CollectorSpec
		wantText []string
	}{
		"reserved key": {fleetv1alpha1.CollectorSpec{ID: "x", RemoteAttributes: map[string]string{"collector.os": "x"}},
			[]string{"spec.remoteAttributes[collector.os]", "reserved"}},
		"empty key": {fleetv1alpha1.CollectorSpec{ID: "x", RemoteAttributes: map[string]string{"": "x"}},
			[]string{"spec.remoteAttributes", "must not be empty"}},
		"long value": {fleetv1alpha1.CollectorSpec{ID: "x", RemoteAttributes: map[string]string{"k": string(long)}},
			[]string{"spec.remoteAttributes[k]", "1024"}},
		"blank id": {fleetv1alpha1.CollectorSpec{ID: "  "}, []string{"spec.id", "Required"}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: tc.spec})
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			for _, s := range tc.wantText {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
	g := NewWithT(t)
	c := &fleetv1alpha1.Collector{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fixed"}, Spec: fleetv1alpha1.CollectorSpec{ID: ns + "-fixed"}}
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	// A merge patch carries no resourceVersion, so the controller adding its finalizer meanwhile cannot turn the
	// expected rejection into a conflict.
	orig := c.DeepCopy()
	c.Spec.ID = "other"
	err := env.Client.Patch(ctx, c, client.MergeFrom(orig))
	g.Expect(err).To(MatchError(ContainSubstring("spec.id")))
	g.Expect(err).To(MatchError(ContainSubstring("immutable")))
}
