package gnmic_test

import (
	"context"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/controllers/gnmic"
	"github.com/quartet-dev/quartet-operator/internal/gnmic/targetsource"
)

// laggingCache is the manager's cached client, except that it has not seen some Targets yet: what a cache
// looks like in the moments between another writer's create and the watch event reaching the informer. Every
// write and every other read goes to the real cache and API server.
type laggingCache struct {
	client.Client
	unseen map[types.NamespacedName]bool
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*gnmicv1alpha1.Target); ok && c.unseen[key] {
		return apierrors.NewNotFound(gnmicv1alpha1.GroupVersion.WithResource("targets").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if targets, ok := list.(*gnmicv1alpha1.TargetList); ok {
		seen := make([]gnmicv1alpha1.Target, 0, len(targets.Items))
		for _, t := range targets.Items {
			if !c.unseen[client.ObjectKeyFromObject(&t)] {
				seen = append(seen, t)
			}
		}
		targets.Items = seen
	}
	return nil
}

// A Target another writer created under a wanted name, not yet in the cache when a run starts, must not be taken
// over by the run's apply (server-side apply with force would otherwise claim its fields and add an owner).
// Likewise a Target this TargetSource wrote itself a moment earlier is recognised as its own, not a conflict.
func TestTargetSourceDoesNotTakeOverTargetsTheCacheHasNotSeen(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	foreign := target(ns, "inv-r2", "192.0.2.2:57400", "mine")
	foreign.Labels = map[string]string{"owner": "someone"}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	g.Expect(env.Client.Create(ctx, staticSource(ns, "inv", dev("r1", "10.0.0.1"), dev("r2", "10.0.0.2")))).To(Succeed())
	waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)
	ownBefore := targetsOf(g, ns, "inv")["inv-r1"]

	mapper, err := targetsource.NewMapper()
	g.Expect(err).NotTo(HaveOccurred())
	writer, err := gnmic.NewTargetWriter(env.Config, nil, env.Manager.GetScheme())
	g.Expect(err).NotTo(HaveOccurred())
	r := &gnmic.TargetSourceReconciler{
		Writer: writer,
		Client: laggingCache{Client: env.Manager.GetClient(), unseen: map[types.NamespacedName]bool{
			{Namespace: ns, Name: "inv-r2"}: true,
		}},
		APIReader: env.Client,
		Recorder:  env.Manager.GetEventRecorder("targetsource-lag-test"),
		Mapper:    mapper,
		Clock:     fakeClock,
	}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "inv"}})
	g.Expect(err).NotTo(HaveOccurred())

	got := &gnmicv1alpha1.Target{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
	g.Expect(got.Spec.Address).To(Equal("192.0.2.2:57400"))
	g.Expect(got.Labels).To(Equal(map[string]string{"owner": "someone"}))
	g.Expect(got.OwnerReferences).To(BeEmpty())
	for _, mf := range got.ManagedFields {
		g.Expect(mf.Manager).NotTo(Equal(gnmic.FieldManager("inv")), "the TargetSource claimed fields of the foreign Target")
	}
	ts := getTS(g, ns, "inv")
	g.Expect(ts.Status.Conflicted).To(Equal(int32(1)))
	g.Expect(ts.Status.Managed).To(Equal(int32(1)))

	// The TargetSource's own Target, missing from the cache too (as right after the run that created it), is
	// recognised with a live read: not a conflict, and not written again since it is up to date.
	r.Client = laggingCache{Client: env.Manager.GetClient(), unseen: map[types.NamespacedName]bool{
		{Namespace: ns, Name: "inv-r1"}: true, {Namespace: ns, Name: "inv-r2"}: true,
	}}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "inv"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(targetsOf(g, ns, "inv")["inv-r1"].ResourceVersion).To(Equal(ownBefore.ResourceVersion))
	ts = getTS(g, ns, "inv")
	g.Expect(ts.Status.Conflicted).To(Equal(int32(1)), "only the foreign Target is a conflict")
	g.Expect(ts.Status.Managed).To(Equal(int32(1)))
}

// staleCache is the manager's cached client still holding Targets that were deleted (and maybe re-created by
// someone else) since: the informer has not seen the delete yet. Listing Targets returns the stale copies
// instead of, or besides, what the cache holds now.
type staleCache struct {
	client.Client
	stale []gnmicv1alpha1.Target
}

func (c staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if targets, ok := list.(*gnmicv1alpha1.TargetList); ok {
		for _, s := range c.stale {
			targets.Items = slices.DeleteFunc(targets.Items, func(t gnmicv1alpha1.Target) bool { return t.Name == s.Name })
			targets.Items = append(targets.Items, s)
		}
	}
	return nil
}

// An owned Target deleted and re-created by someone else while the cache still holds the owned one must not be
// taken over: the update carries the cached UID, which the API server refuses for the new object. And an owned
// Target deleted since the cache saw it is created again.
func TestTargetSourceDoesNotTakeOverATargetReplacedBehindTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, staticSource(ns, "inv", dev("r1", "10.0.0.1")))).To(Succeed())
	waitReason(t, ns, "inv", gnmicv1alpha1.ReasonSucceeded)
	stale := targetsOf(g, ns, "inv")["inv-r1"]
	stale.Spec.Address = "10.9.9.9:57400" // what the cache last saw differs from the inventory: the run writes

	g.Expect(env.Client.Delete(ctx, &stale)).To(Succeed())
	foreign := target(ns, "inv-r1", "192.0.2.2:57400", "mine")
	foreign.Labels = map[string]string{"owner": "someone"}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())

	mapper, err := targetsource.NewMapper()
	g.Expect(err).NotTo(HaveOccurred())
	writer, err := gnmic.NewTargetWriter(env.Config, nil, env.Manager.GetScheme())
	g.Expect(err).NotTo(HaveOccurred())
	r := &gnmic.TargetSourceReconciler{
		Writer:    writer,
		Client:    staleCache{Client: env.Manager.GetClient(), stale: []gnmicv1alpha1.Target{stale}},
		APIReader: env.Client,
		Recorder:  env.Manager.GetEventRecorder("targetsource-stale-test"),
		Mapper:    mapper,
		Clock:     fakeClock,
	}
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "inv"}})
	g.Expect(err).NotTo(HaveOccurred())
	got := &gnmicv1alpha1.Target{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
	g.Expect(got.UID).To(Equal(foreign.UID))
	g.Expect(got.Spec.Address).To(Equal("192.0.2.2:57400"))
	g.Expect(got.Labels).To(Equal(map[string]string{"owner": "someone"}))
	g.Expect(got.OwnerReferences).To(BeEmpty())
	for _, mf := range got.ManagedFields {
		g.Expect(mf.Manager).NotTo(Equal(gnmic.FieldManager("inv")), "the TargetSource claimed fields of the foreign Target")
	}
	g.Expect(getTS(g, ns, "inv").Status.Conflicted).To(Equal(int32(1)))

	// The foreign Target goes too; the cache still shows the owned one: the run creates it again.
	g.Expect(env.Client.Delete(ctx, foreign)).To(Succeed())
	_, err = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "inv"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		restored := targetsOf(g, ns, "inv")["inv-r1"]
		g.Expect(restored.Spec.Address).To(Equal("10.0.0.1:57400"))
		g.Expect(restored.OwnerReferences).To(ContainElement(HaveField("Name", "inv")))
	}).Should(Succeed())
}
