package gnmic

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
	"github.com/quartet-dev/quartet-operator/test/gnmicserver"
)

// BenchmarkClusterRecollectsAfterPodLoss measures how long the targets of a lost collector pod go uncollected:
// 1,000 Targets on a Cluster of 3 collector pods with the default unreadyGracePeriod (30 s); pod 1 is made unready
// by the simulated kubelet (testenv.CrashLoopStage, as a container that keeps exiting) and the clock runs from the
// pod's Ready transition until collectors 0 and 2 together hold every Target. The floor is the grace period itself
// (targets are not moved before it ends, so a short blip moves nothing); the bound is grace + 10 s. The
// time until every Target's status names its new pod is printed too.
func BenchmarkClusterRecollectsAfterPodLoss(b *testing.B) {
	g := NewWithT(b)
	g.SetDefaultEventuallyTimeout(5 * time.Minute)
	ctx := context.Background()
	grace := gnmicv1alpha1.DefaultUnreadyGracePeriod
	bound := grace + 10*time.Second
	for n := range b.N {
		ns := fmt.Sprintf("podloss-%d", n)
		g.Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		var servers []*gnmicserver.Server
		for range 3 {
			s, err := gnmicserver.Start("127.0.0.1:0")
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = s.Close() }()
			servers = append(servers, s)
		}
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.TargetProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ifaces"},
			Spec: gnmicv1alpha1.SubscriptionSpec{Paths: []string{"/interfaces"}}})).To(Succeed())
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.Output{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sink"},
			Spec: gnmicv1alpha1.OutputSpec{Type: gnmicv1alpha1.OutputFile}})).To(Succeed())
		createTargets(g, ns, 0, targets)
		replicas := int32(3)
		g.Expect(dialMap.Add(gnmicserver.ServerDialMapEntries(ns, "lossy", 0, servers))).To(Succeed())
		c := &gnmicv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lossy"},
			Spec: gnmicv1alpha1.ClusterSpec{Image: "gnmic", Replicas: &replicas}}
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		g.Expect(env.Client.Create(ctx, &gnmicv1alpha1.GnmicPipeline{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"},
			Spec: gnmicv1alpha1.PipelineSpec{ClusterRef: "lossy", Enabled: true, SubscriptionRefs: []string{"ifaces"},
				Outputs:         gnmicv1alpha1.PipelineOutputs{OutputRefs: []string{"sink"}},
				TargetSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"bench": "yes"}}}}})).To(Succeed())
		// Settled: every collector configured and every Target's status naming its pod (placement is sticky).
		g.Eventually(func(g Gomega) {
			g.Expect(held(servers)).To(Equal(targets))
			g.Expect(servers[1].TargetNames()).NotTo(BeEmpty())
			g.Expect(onPod(g, ns, "gnmic-lossy-1")).To(HaveLen(len(servers[1].TargetNames())))
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			g.Expect(c.Status.TargetsNotCollected).To(BeZero())
		}).WithPolling(100 * time.Millisecond).Should(Succeed())
		lostTargets := len(servers[1].TargetNames())

		lost := &corev1.Pod{}
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gnmic-lossy-1"}, lost)).To(Succeed())
		patch := client.MergeFrom(lost.DeepCopy())
		lost.Labels[testenv.CrashLoopLabel] = testenv.CrashLoopValue
		injected := time.Now()
		g.Expect(env.Client.Patch(ctx, lost, patch)).To(Succeed())
		var transition time.Time
		g.Eventually(func(g Gomega) {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lost), lost)).To(Succeed())
			for _, cond := range lost.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionFalse {
					transition = cond.LastTransitionTime.Time
				}
			}
			g.Expect(transition).NotTo(BeZero())
		}).WithPolling(10 * time.Millisecond).Should(Succeed())
		seenUnready := time.Now()

		// Collected again: the two ready collectors hold every Target between them.
		ready := []*gnmicserver.Server{servers[0], servers[2]}
		g.Eventually(func() int { return held(ready) }).WithPolling(50 * time.Millisecond).
			WithTimeout(bound + time.Minute).Should(Equal(targets))
		recollected := time.Now()
		g.Eventually(func(g Gomega) { g.Expect(onPod(g, ns, "gnmic-lossy-1")).To(BeEmpty()) }).
			WithPolling(100 * time.Millisecond).Should(Succeed())
		statuses := time.Now()

		// The Ready transition is stamped by the simulated kubelet in whole seconds (truncated): counted from it the
		// figure is at most 1 s long, never short.
		fromTransition := recollected.Sub(transition)
		fmt.Printf("\n%-62s %12s %10s\n", fmt.Sprintf("gnmic-cluster, %d Targets, 3 collectors, pod 1 lost", targets), "value", "of bound")
		fmt.Printf("%-62s %12s %10s\n", "grace period (spec.targetDistribution.unreadyGracePeriod default)", grace, "")
		fmt.Printf("%-62s %12d %10s\n", "Targets on the lost pod", lostTargets, "")
		fmt.Printf("%-62s %12s %10s\n", "crash injected -> bench sees the pod unready", seenUnready.Sub(injected).Round(time.Millisecond), "")
		fmt.Printf("%-62s %12s %9.0f%%\n", "pod Ready=False -> collectors 0 and 2 hold every Target", fromTransition.Round(time.Millisecond),
			100*float64(fromTransition)/float64(bound))
		fmt.Printf("%-62s %12s %10s\n", "  beyond the grace period", (fromTransition - grace).Round(time.Millisecond), "")
		fmt.Printf("%-62s %12s %10s\n", "pod Ready=False -> every Target status names a ready pod", statuses.Sub(transition).Round(time.Millisecond), "")
		fmt.Printf("%-62s %12s %10s\n", "bound (grace + 10 s)", bound, "100%")
		b.ReportMetric(fromTransition.Seconds(), "s-to-recollect")
		b.ReportMetric((fromTransition - grace).Seconds(), "s-beyond-grace")
		g.Expect(fromTransition).To(BeNumerically("<=", bound), "re-collected within grace + 10 s")
		g.Expect(fromTransition).To(BeNumerically(">=", grace-time.Second), "nothing moves before the grace period ends")
	}
}

// onPod lists the Targets whose status names the given collector pod of the Cluster "lossy".
func onPod(g Gomega, ns, pod string) []string {
	list := &gnmicv1alpha1.TargetList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, t := range list.Items {
		if st, ok := t.Status.ClusterStates["lossy"]; ok && st.Pod == pod {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}
