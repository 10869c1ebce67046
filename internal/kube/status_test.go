package kube_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{WithoutOperator: true}))
}

// node creates a Node (a built-in kind with a status subresource that needs nothing else to exist).
func node(t *testing.T, g Gomega) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "status-patch-"}}
	g.Expect(env.Client.Create(context.Background(), n)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), n) })
	return n
}

// A reconcile that decided on a stale copy must not merge its decision onto a newer status: the newer write
// (phase and condition of one decision) would otherwise be left mixed with the stale decision's phase.
func TestStatusPatchFromAStaleReadConflicts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stale := node(t, g)

	newer := stale.DeepCopy()
	newerBefore := newer.DeepCopy()
	newer.Status.Phase = corev1.NodeRunning
	newer.Status.Conditions = []corev1.NodeCondition{{Type: "Stage", Status: corev1.ConditionTrue, Reason: "Progressing"}}
	g.Expect(kube.PatchStatusIfChangedOptimistic(ctx, env.Client, newerBefore, newer)).To(Succeed())

	before := stale.DeepCopy()
	stale.Status.Phase = corev1.NodeTerminated
	err := kube.PatchStatusIfChangedOptimistic(ctx, env.Client, before, stale)
	g.Expect(apierrors.IsConflict(err)).To(BeTrue(), "a patch decided on a stale read is refused, got %v", err)

	got := &corev1.Node{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(stale), got)).To(Succeed())
	g.Expect(got.Status.Phase).To(Equal(corev1.NodeRunning), "the newer status stays whole")
}

// The reconciler's own write earlier in the same pass (here a label) is not a conflict.
func TestStatusPatchAfterOwnMetadataWriteSucceeds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	n := node(t, g)
	before := n.DeepCopy()

	patch := client.MergeFrom(n.DeepCopy())
	n.Labels = map[string]string{"example.com/finalized": "yes"}
	g.Expect(env.Client.Patch(ctx, n, patch)).To(Succeed())

	n.Status.Phase = corev1.NodeRunning
	g.Expect(kube.PatchStatusIfChangedOptimistic(ctx, env.Client, before, n)).To(Succeed())
	got := &corev1.Node{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(n), got)).To(Succeed())
	g.Expect(got.Status.Phase).To(Equal(corev1.NodeRunning))
	g.Expect(got.Labels).To(HaveKeyWithValue("example.com/finalized", "yes"))
}

// No change, no request: the resourceVersion stays.
func TestStatusPatchWithoutChangeWritesNothing(t *testing.T) {
	g := NewWithT(t)
	n := node(t, g)
	rv := n.ResourceVersion
	g.Expect(kube.PatchStatusIfChangedOptimistic(context.Background(), env.Client, n.DeepCopy(), n)).To(Succeed())
	g.Expect(n.ResourceVersion).To(Equal(rv))
}
