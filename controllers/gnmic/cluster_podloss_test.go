package gnmic_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// podReady reads the Ready condition of collector pod i of a cluster.
func podReady(g Gomega, ns, clusterName string, i int) bool {
	p := &corev1.Pod{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("gnmic-%s-%d", clusterName, i)}, p)).To(Succeed())
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// One collector pod crashing (the simulated kubelet's CrashLoopStage) freezes nothing: the two ready pods keep
// receiving changes, the lost pod's targets are collected elsewhere once the grace period has passed (and not
// before), per-pod state is in the Cluster's status, and the targets come back to the pod when it is ready again.
func TestClusterKeepsCollectingWhenOnePodIsLost(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 3)
	names := fleet(g, ns, 30)
	c := cluster(g, ns, "lossy", 3, servers)
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	// A merge patch of raw JSON, so that the scenario also runs (and fails) against an API without the field.
	const grace = 6 * time.Second
	g.Expect(env.Client.Patch(ctx, c, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"targetDistribution":{"unreadyGracePeriod":"6s"}}}`)))).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "lossy"))).To(Succeed())
	g.Eventually(func(g Gomega) { expectServersHoldPlacement(g, ns, "lossy", servers, names) }).WithTimeout(30 * time.Second).Should(Succeed())
	before := placedPods(g, ns, "lossy")
	var onLost []string
	for tg, pod := range before {
		if pod == "gnmic-lossy-1" {
			onLost = append(onLost, tg)
		}
	}
	g.Expect(onLost).NotTo(BeEmpty())

	lost := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-lossy-1"}, lost)).To(Succeed())
	patch := client.MergeFrom(lost.DeepCopy())
	lost.Labels[testenv.CrashLoopLabel] = testenv.CrashLoopValue
	g.Expect(env.Client.Patch(ctx, lost, patch)).To(Succeed())
	g.Eventually(func(g Gomega) bool { return podReady(g, ns, "lossy", 1) }).WithTimeout(20 * time.Second).Should(BeFalse())
	unreadyAt := time.Now()

	// Within the grace period the ready pods still get changes: a new target, and a changed address.
	extra := target(ns, "r999", "192.0.2.250:57400", "default")
	extra.Labels = map[string]string{"role": "core"}
	g.Expect(env.Client.Create(ctx, extra)).To(Succeed())
	var onZero string
	for tg, pod := range before {
		if pod == "gnmic-lossy-0" {
			onZero = tg
			break
		}
	}
	// A merge patch of the spec alone: the controller writes the Target's status meanwhile.
	moved := &gnmicv1alpha1.Target{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: onZero[len(ns)+1:]}}
	g.Expect(env.Client.Patch(ctx, moved, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"address":"198.51.100.7:57400"}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(servers[0].Config().Targets).To(HaveKey(onZero))
		g.Expect(servers[0].Config().Targets[onZero].Address).To(Equal("198.51.100.7:57400"))
	}).WithTimeout(grace-time.Second).Should(Succeed(), "pod 0 is configured while pod 1 is unready")

	// After the grace period every target is collected by pods 0 and 2, and those two only.
	all := append(slices.Clone(names), ns+"/r999")
	slices.Sort(all)
	g.Eventually(func(g Gomega) {
		pods := placedPods(g, ns, "lossy")
		g.Expect(pods).To(HaveLen(len(all)))
		for tg, pod := range pods {
			g.Expect(pod).NotTo(Equal("gnmic-lossy-1"), tg)
		}
		held := append(servers[0].TargetNames(), servers[2].TargetNames()...)
		slices.Sort(held)
		g.Expect(held).To(Equal(all))
	}).WithTimeout(grace + 10*time.Second).Should(Succeed())
	recollected := time.Since(unreadyAt)
	g.Expect(recollected).To(BeNumerically(">=", grace-time.Second), "targets wait out the grace period")
	t.Logf("unready to re-collected: %s (grace %s)", recollected, grace)
	for tg, pod := range placedPods(g, ns, "lossy") {
		if before[tg] != "" && before[tg] != "gnmic-lossy-1" {
			g.Expect(pod).To(Equal(before[tg]), "%s stays on its ready pod", tg)
		}
	}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		g.Expect(c.Status.Pods).To(HaveLen(3))
		g.Expect(c.Status.Pods[1].Name).To(Equal("gnmic-lossy-1"))
		g.Expect(c.Status.Pods[1].Ready).To(BeFalse())
		g.Expect(c.Status.Pods[1].State).To(Equal(gnmicv1alpha1.CollectorPodEvacuated))
		g.Expect(c.Status.Pods[1].Targets).To(BeZero())
		g.Expect(c.Status.Pods[0].State).To(Equal(gnmicv1alpha1.CollectorPodConfigured))
		g.Expect(c.Status.Pods[0].Targets + c.Status.Pods[2].Targets).To(Equal(int32(len(all))))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// The pod is replaced and ready again: targets move back onto it under the same placement rule.
	g.Expect(env.Client.Delete(ctx, lost)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(podReady(g, ns, "lossy", 1)).To(BeTrue())
		expectServersHoldPlacement(g, ns, "lossy", servers, all)
		g.Expect(servers[1].TargetNames()).NotTo(BeEmpty())
	}).WithTimeout(40 * time.Second).Should(Succeed())
	for tg, pod := range placedPods(g, ns, "lossy") {
		if pod != "gnmic-lossy-1" {
			g.Expect(before[tg] == "" || before[tg] == pod || before[tg] == "gnmic-lossy-1").To(BeTrue(),
				"%s only moves onto the returning pod", tg)
		}
	}
}

// A collector found on a poll holding other targets than its plan (restarted empty, its stream never seen to
// drop) gets its plan again.
func TestClusterRepushesACollectorFoundEmpty(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	servers := collectors(t, 1)
	names := fleet(g, ns, 3)
	g.Expect(env.Client.Create(ctx, cluster(g, ns, "amnesic", 1, servers))).To(Succeed())
	g.Expect(env.Client.Create(ctx, pipelineFor(ns, "p", "amnesic"))).To(Succeed())
	g.Eventually(servers[0].TargetNames).WithTimeout(30 * time.Second).Should(Equal(names))
	applies := servers[0].ApplyCount()

	servers[0].Wipe()
	g.Expect(servers[0].TargetNames()).To(BeEmpty())
	// The suite polls every second: a few polls are enough.
	g.Eventually(servers[0].TargetNames).WithTimeout(10 * time.Second).Should(Equal(names))
	g.Expect(servers[0].ApplyCount()).To(Equal(applies + 1))
}
