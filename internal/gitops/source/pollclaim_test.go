package source

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// pollReplicas are source handler replicas sharing one API server; each counts the ref listings its polls make.
// The listings fail, and the targets have nothing deployed, so no event starts: only the polls are observed.
func pollReplicas(n int, objs ...client.Object) ([]*Handler, *atomic.Int32, client.Client) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	var listings atomic.Int32
	var out []*Handler
	for range n {
		out = append(out, &Handler{Client: c, listRef: func(context.Context, Target) (string, error) {
			listings.Add(1)
			return "", errors.New("no git here")
		}})
	}
	return out, &listings, c
}

func pollTarget(name string, annotations map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name, Annotations: annotations,
		Labels: map[string]string{pipeline.LabelType: pipeline.TypeSourceTarget}},
		Data: map[string]string{"repo-url": "https://git.example/app.git", "ref": "main", "path": "deploy",
			DataReconcileInterval: "1m"}}
}

// TestOneReplicaPollsATargetPerInterval: two source handler replicas look at a target on their own ticks; the
// first one due claims the poll, the other sees the claim and does not list the ref again within the interval.
func TestOneReplicaPollsATargetPerInterval(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hs, listings, c := pollReplicas(2, pollTarget("web", map[string]string{pipeline.AnnotationEventID: "e1"}))
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	hs[0].reconcileDue(ctx, t0)
	hs[1].reconcileDue(ctx, t0.Add(20*time.Second))
	g.Expect(listings.Load()).To(BeZero(), "a target that ran before waits an interval after a start")

	hs[0].reconcileDue(ctx, t0.Add(2*time.Minute))
	g.Expect(listings.Load()).To(BeEquivalentTo(1))
	hs[1].reconcileDue(ctx, t0.Add(2*time.Minute+20*time.Second))
	g.Expect(listings.Load()).To(BeEquivalentTo(1), "the second replica polled the target again within its interval")
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "team", Name: "web"}, cm)).To(Succeed())
	g.Expect(cm.Annotations).To(HaveKeyWithValue(AnnotationPolledAt, "2026-12-06T12:02:00Z"))

	// An interval later, whichever replica comes first polls, once.
	hs[1].reconcileDue(ctx, t0.Add(4*time.Minute))
	hs[0].reconcileDue(ctx, t0.Add(4*time.Minute+time.Second))
	g.Expect(listings.Load()).To(BeEquivalentTo(2))
}

// TestARenamedTargetPollsAtOnce: a target that replaces another one (katastroma.org/renamed-from) and never ran
// is polled on the first pass instead of an interval later (the target it replaces is going); one replica does
// it. Another new target waits its interval, so registering it right before its first push does not race the
// webhook.
func TestARenamedTargetPollsAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hs, listings, _ := pollReplicas(2, pollTarget("new", map[string]string{pipeline.AnnotationRenamedFrom: "old"}),
		pollTarget("plain", nil))
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	hs[0].reconcileDue(ctx, t0)
	hs[1].reconcileDue(ctx, t0.Add(time.Second))
	g.Expect(listings.Load()).To(BeEquivalentTo(1))
}

// TestAPollWhoseClaimConflictedIsRetried: the claim of a due target conflicts (an event released its lease between
// the list and the claim); the replica does not count that as a poll and claims on its next tick, instead of
// leaving the target unpolled for a whole interval.
func TestAPollWhoseClaimConflictedIsRetried(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hs, listings, c := pollReplicas(1, pollTarget("web", map[string]string{pipeline.AnnotationEventID: "e1"}))
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	hs[0].reconcileDue(ctx, t0)
	// Between the next tick's list and its claim, the target changes: the claim conflicts.
	hs[0].Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, obj.GetName(),
				errors.New("changed since the list"))
		}})
	hs[0].reconcileDue(ctx, t0.Add(2*time.Minute))
	g.Expect(listings.Load()).To(BeZero())
	hs[0].Client = c
	hs[0].reconcileDue(ctx, t0.Add(2*time.Minute+10*time.Second))
	g.Expect(listings.Load()).To(BeEquivalentTo(1), "the conflicted poll waited a whole interval")
}
