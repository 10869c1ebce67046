package agentrax

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// summarize's phase (a pure function of the agent and its stable Deployment as read; no object is written): a
// degraded stable shows as Degraded even after a failed rollout, so the Degraded alert fires, and RolloutFailed
// comes back once the stable recovers while spec.image still names the rolled-back image.
func TestSummarizedPhase(t *testing.T) {
	stalled := appsv1.DeploymentStatus{AvailableReplicas: 0, Conditions: []appsv1.DeploymentCondition{{
		Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}}
	healthy := appsv1.DeploymentStatus{AvailableReplicas: 2, Replicas: 2}
	failedAgent := func(phase agentraxv1alpha1.Phase) *agentraxv1alpha1.AgentDeployment {
		ad := &agentraxv1alpha1.AgentDeployment{}
		ad.Spec.Image = "img:v2"
		ad.Spec.Replicas.Min = 2
		ad.Spec.Rollout = &agentraxv1alpha1.RolloutSpec{Strategy: agentraxv1alpha1.StrategyCanary}
		ad.Status = agentraxv1alpha1.AgentDeploymentStatus{Phase: phase, StableVersion: "img:v1", AbortedVersion: "img:v2"}
		return ad
	}
	for _, tc := range []struct {
		name  string
		ad    *agentraxv1alpha1.AgentDeployment
		dep   appsv1.DeploymentStatus
		phase agentraxv1alpha1.Phase
	}{
		{"failed rollout, healthy stable", failedAgent(agentraxv1alpha1.PhaseRolloutFailed), healthy, agentraxv1alpha1.PhaseRolloutFailed},
		{"failed rollout, degraded stable", failedAgent(agentraxv1alpha1.PhaseRolloutFailed), stalled, agentraxv1alpha1.PhaseDegraded},
		{"degraded stable recovers, rollout still failed", failedAgent(agentraxv1alpha1.PhaseDegraded), healthy, agentraxv1alpha1.PhaseRolloutFailed},
		{"rollout in progress is kept", failedAgent(agentraxv1alpha1.PhaseRolloutInProgress), stalled, agentraxv1alpha1.PhaseRolloutInProgress},
		{"no failed rollout", func() *agentraxv1alpha1.AgentDeployment {
			ad := failedAgent(agentraxv1alpha1.PhaseRunning)
			ad.Status.AbortedVersion = ""
			return ad
		}(), stalled, agentraxv1alpha1.PhaseDegraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &AgentDeploymentReconciler{}
			r.summarize(tc.ad, &observed{deployment: &appsv1.Deployment{Status: tc.dep}})
			NewWithT(t).Expect(tc.ad.Status.Phase).To(Equal(tc.phase))
		})
	}
}
