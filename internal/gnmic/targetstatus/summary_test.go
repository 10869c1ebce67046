package targetstatus

import (
	"testing"

	. "github.com/onsi/gomega"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

func TestSummarize(t *testing.T) {
	ready := gnmicv1alpha1.ClusterTargetState{State: "running", ConnectionState: "READY"}
	connecting := gnmicv1alpha1.ClusterTargetState{State: "running", ConnectionState: "CONNECTING"}
	failed := gnmicv1alpha1.ClusterTargetState{State: "failed", ConnectionState: "READY", FailedReason: "auth"}
	for name, tc := range map[string]struct {
		states       map[string]gnmicv1alpha1.ClusterTargetState
		wantClusters int32
		wantState    string
	}{
		"no cluster holds it":  {nil, 0, ""},
		"one ready cluster":    {map[string]gnmicv1alpha1.ClusterTargetState{"a": ready}, 1, "READY"},
		"all ready":            {map[string]gnmicv1alpha1.ClusterTargetState{"a": ready, "b": ready}, 2, "READY"},
		"one still connecting": {map[string]gnmicv1alpha1.ClusterTargetState{"a": ready, "b": connecting}, 2, "DEGRADED"},
		"failed but READY":     {map[string]gnmicv1alpha1.ClusterTargetState{"a": failed}, 1, "DEGRADED"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			clusters, state := Summarize(tc.states)
			g.Expect(clusters).To(Equal(tc.wantClusters))
			g.Expect(state).To(Equal(tc.wantState))
		})
	}
}
