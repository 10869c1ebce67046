// Package targetstatus derives a Target's summary fields and Ready condition from what each collector cluster
// reports.
package targetstatus

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// runningState is the collector run state of a target whose subscriptions are active.
const runningState = "running"

// Summarize returns how many clusters hold the target and its overall connection state: READY only if every
// cluster reports the target running with a READY connection, DEGRADED if any does not, and "" when no cluster
// holds it.
func Summarize(states map[string]gnmicv1alpha1.ClusterTargetState) (clusters int32, connectionState string) {
	if len(states) == 0 {
		return 0, ""
	}
	connectionState = gnmicv1alpha1.ConnectionStateReady
	for _, s := range states {
		if s.State != runningState || s.ConnectionState != gnmicv1alpha1.ConnectionStateReady {
			connectionState = gnmicv1alpha1.ConnectionStateDegraded
		}
	}
	return int32(len(states)), connectionState
}

// Ready is a Target's Ready condition for generation: False with ProfileNotFound while its TargetProfile is missing,
// NotCollected while no cluster holds it, Degraded (naming each cluster and what it reports) while any cluster does
// not have it running and READY, and True (Connected) otherwise.
func Ready(generation int64, profileResolved bool, profile string, states map[string]gnmicv1alpha1.ClusterTargetState) metav1.Condition {
	cond := metav1.Condition{Type: gnmicv1alpha1.TargetConditionReady, ObservedGeneration: generation}
	clusters, connection := Summarize(states)
	switch {
	case !profileResolved:
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonProfileNotFound
		cond.Message = fmt.Sprintf("TargetProfile %q does not exist", profile)
	case clusters == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonTargetNotCollected
		cond.Message = "no Cluster collects this target: no enabled GnmicPipeline selects it, or its Cluster has not placed it yet"
	case connection != gnmicv1alpha1.ConnectionStateReady:
		cond.Status, cond.Reason = metav1.ConditionFalse, gnmicv1alpha1.ReasonTargetDegraded
		var problems []string
		for _, name := range slices.Sorted(maps.Keys(states)) {
			s := states[name]
			if s.State == runningState && s.ConnectionState == gnmicv1alpha1.ConnectionStateReady {
				continue
			}
			p := fmt.Sprintf("Cluster %s: %s, connection %s", name, orUnknown(s.State), orUnknown(s.ConnectionState))
			if s.FailedReason != "" {
				p += " (" + s.FailedReason + ")"
			}
			problems = append(problems, p)
		}
		cond.Message = strings.Join(problems, "; ")
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, gnmicv1alpha1.ReasonTargetConnected
		cond.Message = fmt.Sprintf("running and READY on %d cluster(s)", clusters)
	}
	return cond
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
