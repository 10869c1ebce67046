package agentrax_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/rollout"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

// mergePatch applies a JSON merge patch to the rig's AgentDeployment.
func (r *rig) mergePatch(patch string) {
	r.t.Helper()
	NewWithT(r.t).Expect(env.Client.Patch(context.Background(), r.ad,
		client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
}

// stableImageIs checks the stable Deployment's container image.
func (r *rig) stableImageIs(g Gomega, image string) {
	dep := &appsv1.Deployment{}
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: r.ns, Name: "bot"}, dep)).To(Succeed())
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
}

// endedAtStable checks what every ended rollout leaves: no canary, the route all on stable, the canary's quota
// charge released.
func (r *rig) endedAtStable(g Gomega) {
	canaryGone(g, r.ns)
	route := r.route(g)
	g.Expect(route.Spec.Rules[0].BackendRefs).To(HaveLen(1))
	g.Expect(route.Spec.Rules[0].BackendRefs[0].Weight).To(Equal(ptr.To[int32](100)))
	g.Eventually(func(g Gomega) {
		g.Expect(getLedger(g, r.ns)).To(ContainElement(HaveField("Replicas", int32(4))), "canary charge released")
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// cordonNodes marks every Node unschedulable until the test ends: pods created from now on stay Pending
// (the scheduler's own verdict), pods already running keep running.
func cordonNodes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	nodes := &corev1.NodeList{}
	g.Expect(env.Client.List(ctx, nodes)).To(Succeed())
	g.Expect(nodes.Items).NotTo(BeEmpty())
	set := func(unschedulable bool) error {
		for i := range nodes.Items {
			n := &corev1.Node{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&nodes.Items[i]), n); err != nil {
				return err
			}
			patch := client.MergeFrom(n.DeepCopy())
			n.Spec.Unschedulable = unschedulable
			if err := env.Client.Patch(ctx, n, patch); err != nil {
				return err
			}
		}
		return nil
	}
	g.Expect(set(true)).To(Succeed())
	t.Cleanup(func() { NewWithT(t).Expect(set(false)).To(Succeed()) })
}

// A promotion whose stable Deployment cannot roll out — its new pods are never scheduled (a full GPU pool has the
// same effect) — ends at spec.rollout.progressDeadline: the promotion is reverted (the stable Deployment back on
// v1, whose old pods never stopped serving), traffic returns to stable, the canary goes with its quota charge,
// and the rollout ends RolloutFailed with ProgressDeadlineExceeded.
func TestCanaryPromotionWhoseStableCannotRollOutEnds(t *testing.T) {
	r := newRig(t, 40)
	r.mergePatch(`{"spec":{"rollout":{"progressDeadline":"8s"}}}`)
	r.startCanaryOfV2()
	// Once the canary holds all traffic with all its pods, no new pod can be scheduled.
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryWeight).To(Equal(int32(100)))
		g.Expect(ad.Status.Stage).To(Equal(agentraxv1alpha1.StageProgressing))
	})
	cordonNodes(t)
	// The promotion moved the stable Deployment to v2: seen in the same poll as the stage, because on a loaded
	// machine the progress deadline can revert it before a later, separate look.
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(Equal(agentraxv1alpha1.StagePromoting))
		r.stableImageIs(g, v2)
	})
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(BeEmpty(), "the promotion ended")
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
		g.Expect(ad.Status.StableVersion).To(Equal(v1))
		g.Expect(ad.Status.AbortedVersion).To(Equal(v2))
		c := rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy)
		g.Expect(c.Reason).To(Equal(rollout.ReasonProgressDeadlineExceeded))
		g.Expect(c.Message).To(ContainSubstring("stable Deployment to roll out"))
	})
	g := NewWithT(t)
	r.stableImageIs(g, v1)
	r.endedAtStable(g)
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 50, 100, 0}))
}

// A rollback through a Gateway that never accepts the route (allowedRoutes excluding the namespace, a parentRef
// typo) ends: the canary's first weight is never accepted, so it is rolled back at the progress deadline; the
// route's return to 100 % stable is never accepted either, so at the next deadline the canary is removed anyway,
// saying so.
func TestCanaryRollbackThroughAGatewayThatNeverAcceptsEnds(t *testing.T) {
	r := newRig(t, 40)
	r.mergePatch(`{"spec":{"rollout":{"progressDeadline":"6s"}}}`)
	r.refuseAll.Store(true)
	r.startCanaryOfV2()
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(Equal(agentraxv1alpha1.StageRollingBack))
	})
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(BeEmpty(), "the rollback ended")
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
		g.Expect(ad.Status.AbortedVersion).To(Equal(v2))
		c := rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy)
		g.Expect(c.Reason).To(Equal(rollout.ReasonProgressDeadlineExceeded))
		g.Expect(c.Message).To(ContainSubstring("the route did not accept 100% stable"))
	})
	g := NewWithT(t)
	r.stableImageIs(g, v1)
	r.endedAtStable(g)
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0}), "the Gateway accepted nothing after v1's route")
}

// A canary whose pods crash in the middle of its last pause — after its own metrics showed enough good
// requests, and with those metrics still good (the Gateway's 503s for it are not in them) — is rolled back at
// the next analysis, never promoted.
func TestCanaryCrashingMidPauseIsRolledBack(t *testing.T) {
	r := newRig(t, 40)
	r.mergePatch(`{"spec":{"rollout":{"steps":[{"setWeight":25},{"pause":{"duration":"3s"}},{"setWeight":100},` +
		`{"pause":{"duration":"40s"}}]}}}`)
	r.startCanaryOfV2()
	r.until(90*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryWeight).To(Equal(int32(100)))
		g.Expect(ad.Status.PauseStartedAt).NotTo(BeNil(), "the last pause runs")
	})
	g := NewWithT(t)
	ctx := context.Background()
	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(r.ns),
		client.MatchingLabels{agentraxv1alpha1.LabelVariant: agentraxv1alpha1.VariantCanary})).To(Succeed())
	g.Expect(pods.Items).NotTo(BeEmpty())
	for i := range pods.Items {
		p := &pods.Items[i]
		patch := client.MergeFrom(p.DeepCopy())
		p.Labels[testenv.CrashLoopLabel] = testenv.CrashLoopValue
		g.Expect(env.Client.Patch(ctx, p, patch)).To(Succeed())
	}
	r.until(30*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Stage).To(BeEmpty())
		g.Expect(ad.Status.StableVersion).To(Equal(v1), "never promoted")
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
		g.Expect(rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy).Reason).To(Equal(rollout.ReasonCanaryUnavailable))
	})
	r.stableImageIs(g, v1)
	r.endedAtStable(g)
}
