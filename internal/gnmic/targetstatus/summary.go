// Package targetstatus derives a Target's summary fields from what each collector cluster reports.
package targetstatus

import (
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
