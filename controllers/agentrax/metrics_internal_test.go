package agentrax

import (
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
)

// The phase gauge has exactly one phase at 1 per AgentDeployment, so `== 1` alerts (RolloutFailed, a rollout
// stuck in RolloutInProgress, Degraded) see each agent once, and a deleted agent leaves no series behind.
func TestRecordPhase(t *testing.T) {
	for _, phase := range allPhases {
		t.Run(string(phase), func(t *testing.T) {
			g := NewWithT(t)
			ad := &agentraxv1alpha1.AgentDeployment{}
			ad.Namespace, ad.Name = "tenant-a", "agent-"+string(phase)
			ad.Status.Phase = phase
			recordPhase(ad)
			for _, other := range allPhases {
				want := 0.0
				if other == phase {
					want = 1
				}
				g.Expect(testutil.ToFloat64(agentPhase.WithLabelValues(ad.Namespace, ad.Name, string(other)))).
					To(Equal(want), "phase %s", other)
			}
			forgetAgentMetrics(ad.Namespace, ad.Name)
			g.Expect(testutil.CollectAndCount(agentPhase)).To(BeZero())
		})
	}
}

// An AgentDeployment whose status has no phase yet publishes nothing rather than a row of zeros.
func TestRecordPhaseSkipsAnEmptyPhase(t *testing.T) {
	ad := &agentraxv1alpha1.AgentDeployment{}
	ad.Namespace, ad.Name = "tenant-a", "new"
	recordPhase(ad)
	NewWithT(t).Expect(testutil.CollectAndCount(agentPhase)).To(BeZero())
}
