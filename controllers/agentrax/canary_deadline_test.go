package agentrax_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// typo is an image the simulated kubelet can never pull (the kwok stage keeps pods of a registry under .invalid
// waiting in ErrImagePull), the way a typo in a tag breaks a real rollout.
const typo = "registry.invalid/agent:v2-typo"

// imagePulling is ImagePullFailed=True with the kubelet's reason.
func imagePulling(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
	c := rolloutCondition(ad, agentraxv1alpha1.ConditionImagePullFailed)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "ImagePullFailed is set from the canary's pods")
	g.Expect(c.Reason).To(BeElementOf("ErrImagePull", "ImagePullBackOff"))
	g.Expect(c.Message).To(ContainSubstring(typo))
}

// A canary whose pods never become available is rolled back at spec.rollout.progressDeadline: traffic stays on
// (and returns to) stable, the canary is removed and its quota charge released; a retry-rollout annotation tries
// the same image again (and it rolls back again); fixing the typo then rolls out.
func TestCanaryImageTypoRollsBackAtProgressDeadline(t *testing.T) {
	r := newRig(t, 40)
	ctx := context.Background()
	// A merge patch of raw JSON, so that the scenario also runs (and fails) against an API without the field.
	NewWithT(t).Expect(env.Client.Patch(ctx, r.ad, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"image":"`+typo+`","rollout":{"progressDeadline":"8s"}}}`)))).To(Succeed())
	r.until(30*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryVersion).To(Equal(typo))
		imagePulling(g, ad)
	})
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
		g.Expect(ad.Status.Stage).To(BeEmpty())
		g.Expect(rolloutCondition(ad, agentraxv1alpha1.ConditionRolloutHealthy).Reason).To(Equal("ProgressDeadlineExceeded"))
		g.Expect(ad.Status.AbortedVersion).To(Equal(typo))
	})
	g := NewWithT(t)
	canaryGone(g, r.ns)
	g.Expect(r.acceptedWeights()).To(HaveEach(int32(0)), "no traffic ever reached the unavailable canary")
	route := r.route(g)
	g.Expect(route.Spec.Rules[0].BackendRefs).To(HaveLen(1))
	g.Expect(route.Spec.Rules[0].BackendRefs[0].Weight).To(Equal(ptr.To[int32](100)))
	g.Eventually(func(g Gomega) {
		g.Expect(getLedger(g, r.ns)).To(ContainElement(HaveField("Replicas", int32(4))), "canary charge released")
	}).WithTimeout(10 * time.Second).Should(Succeed())
	r.until(30*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(rolloutCondition(ad, agentraxv1alpha1.ConditionImagePullFailed).Status).To(Equal(metav1.ConditionFalse),
			"cleared once the failing pods are gone")
	})

	// Asked to, the rolled-back image is tried once more (a new retry-rollout value), and rolls back again.
	g.Expect(env.Client.Patch(ctx, r.ad, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+agentraxv1alpha1.AnnotationRetryRollout+`":"1"}}}`)))).To(Succeed())
	r.until(30*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryVersion).To(Equal(typo))
		g.Expect(ad.Status.RetriedRollout).To(Equal("1"))
		g.Expect(ad.Status.AbortedVersion).To(BeEmpty())
	})
	r.until(60*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutFailed))
		g.Expect(ad.Status.Stage).To(BeEmpty())
		g.Expect(ad.Status.AbortedVersion).To(Equal(typo))
	})
	// The value acted on does not retry again.
	g.Consistently(func(g Gomega) {
		ad := r.get(g)
		g.Expect(ad.Status.CanaryVersion).To(BeEmpty())
		g.Expect(ad.Status.AbortedVersion).To(Equal(typo))
		g.Expect(ad.Status.RetriedRollout).To(Equal("1"))
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())

	// The typo is fixed by fixing the typo.
	r.startCanaryOfV2()
	r.until(120*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.StableVersion).To(Equal(v2))
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning))
	})
}

// The image may change during a rollout: the canary stuck in ErrImagePull is replaced by one of the new image,
// which starts again at step 0 and is promoted; ImagePullFailed clears once no pod fails to pull.
func TestCanaryImageFixedMidRollout(t *testing.T) {
	r := newRig(t, 40)
	ctx := context.Background()
	NewWithT(t).Eventually(func(g Gomega) {
		ad := r.get(g)
		ad.Spec.Image = typo
		g.Expect(env.Client.Update(ctx, ad)).To(Succeed())
	}).Should(Succeed())
	r.until(30*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRolloutInProgress))
		imagePulling(g, ad)
	})
	g := NewWithT(t)
	ad := r.get(g)
	ad.Spec.Image = v2
	g.Expect(env.Client.Update(ctx, ad)).To(Succeed(), "spec.image may change while a rollout runs")
	r.until(30*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.CanaryVersion).To(Equal(v2))
	})
	r.until(120*time.Second, func(g Gomega, ad *agentraxv1alpha1.AgentDeployment) {
		g.Expect(ad.Status.StableVersion).To(Equal(v2))
		g.Expect(ad.Status.Phase).To(Equal(agentraxv1alpha1.PhaseRunning))
		g.Expect(rolloutCondition(ad, agentraxv1alpha1.ConditionImagePullFailed).Status).To(Equal(metav1.ConditionFalse))
	})
	g.Expect(r.acceptedWeights()).To(Equal([]int32{0, 25, 50, 100, 0}),
		"the typo never got traffic; the new canary walked every step from step 0")
}
