package targetstatus

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

func TestReady(t *testing.T) {
	ready := gnmicv1alpha1.ClusterTargetState{State: "running", ConnectionState: "READY"}
	failed := gnmicv1alpha1.ClusterTargetState{State: "failed", FailedReason: "connection refused"}
	for name, tc := range map[string]struct {
		resolved    bool
		states      map[string]gnmicv1alpha1.ClusterTargetState
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		"profile missing wins":   {false, map[string]gnmicv1alpha1.ClusterTargetState{"a": ready}, metav1.ConditionFalse, "ProfileNotFound", `TargetProfile "lab" does not exist`},
		"no cluster holds it":    {true, nil, metav1.ConditionFalse, "NotCollected", "no Cluster collects this target"},
		"every cluster ready":    {true, map[string]gnmicv1alpha1.ClusterTargetState{"a": ready, "b": ready}, metav1.ConditionTrue, "Connected", "running and READY on 2 cluster(s)"},
		"one cluster failing":    {true, map[string]gnmicv1alpha1.ClusterTargetState{"a": ready, "b": failed}, metav1.ConditionFalse, "Degraded", "Cluster b: failed, connection unknown (connection refused)"},
		"reported in name order": {true, map[string]gnmicv1alpha1.ClusterTargetState{"z": failed, "c": {State: "running", ConnectionState: "CONNECTING"}}, metav1.ConditionFalse, "Degraded", "Cluster c: running, connection CONNECTING; Cluster z: failed"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cond := Ready(7, tc.resolved, "lab", tc.states)
			g.Expect(cond.Type).To(Equal("Ready"))
			g.Expect(cond.ObservedGeneration).To(Equal(int64(7)))
			g.Expect(cond.Status).To(Equal(tc.wantStatus))
			g.Expect(cond.Reason).To(Equal(tc.wantReason))
			g.Expect(cond.Message).To(ContainSubstring(tc.wantMessage))
		})
	}
}
