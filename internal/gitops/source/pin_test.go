package source

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// TestAPinnedTargetIsLeftToItsPlatform: the source handlers of two Platforms share one API server. The first lease
// pins an unpinned target to its Platform; the other Platform's handler then takes no lease for a new event or a
// replay (a *NotServed naming the Platform that serves it) and does not even claim the target's poll, which would
// delay its own Platform's poll by an interval.
func TestAPinnedTargetIsLeftToItsPlatform(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hs, listings, c := pollReplicas(2, pollTarget("web", map[string]string{pipeline.AnnotationEventID: "e1"}))
	a, b := hs[0], hs[1]
	a.Lease.Platform, b.Lease.Platform = "plat-a/a", "plat-b/b"
	key := client.ObjectKey{Namespace: "team", Name: "web"}
	read := func() *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, key, cm)).To(Succeed())
		return cm
	}

	g.Expect(a.Lease.AcquireNew(ctx, c, key, "lease-a", "e2", "sha")).To(Succeed())
	g.Expect(read().Annotations).To(HaveKeyWithValue(AnnotationServedBy, "plat-a/a"), "the first lease pins the target")
	g.Expect(Release(ctx, c, key, "lease-a", ResultSucceeded, nil)).To(Succeed())

	err := b.Lease.AcquireNew(ctx, c, key, "lease-b", "e3", "sha")
	notServed, ok := errors.AsType[*NotServed](err)
	g.Expect(ok).To(BeTrue(), "B took the lease of A's target: %v", err)
	g.Expect(notServed.Error()).To(Equal("source target team/web is served by Platform plat-a/a (annotation " +
		"katastroma.org/served-by), not by Platform plat-b/b"))
	_, ok = errors.AsType[*NotServed](b.Lease.AcquireReplay(ctx, c, read(), "lease-b"))
	g.Expect(ok).To(BeTrue(), "B replayed A's target")
	_, ok = errors.AsType[*NotServed](b.startTargetEvent(ctx, read(), EventPoll, "sha", "", false))
	g.Expect(ok).To(BeTrue(), "B started a poll event on A's target")
	g.Expect(read().Annotations).To(And(HaveKeyWithValue(pipeline.AnnotationEventID, "e2"),
		Not(HaveKey(pipeline.AnnotationLeaseID))), "B wrote to A's target")

	// Polls: B never claims A's target; A does, an interval after it first saw it.
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, h := range hs {
		h.reconcileDue(ctx, t0)
	}
	b.reconcileDue(ctx, t0.Add(2*time.Minute))
	g.Expect(listings.Load()).To(BeZero())
	g.Expect(read().Annotations).NotTo(HaveKey(AnnotationPolledAt), "B claimed the poll of A's target")
	a.reconcileDue(ctx, t0.Add(2*time.Minute+time.Second))
	g.Expect(listings.Load()).To(BeEquivalentTo(1))

	// A handler outside any Platform pins nothing and leaves pinned targets alone too.
	dev := &Handler{Client: c}
	_, ok = errors.AsType[*NotServed](dev.Lease.AcquireNew(ctx, c, key, "lease-dev", "e4", "sha"))
	g.Expect(ok).To(BeTrue())
}
