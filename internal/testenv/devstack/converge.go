// Package devstack holds the local peers and sample fixtures that `make dev` and the install tests share: a Fleet
// Management API server, gNMIc collector stand-ins behind the sample Cluster, the sample TargetSource's inventory,
// and the samples' steady states.
package devstack

import (
	"context"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	gitopsv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gitops/v1alpha1"
	gnmicv1alpha1 "github.com/quartet-dev/quartet-operator/apis/gnmic/v1alpha1"
)

// SteadyState is one sample's converged state, read from the status the operator writes.
type SteadyState struct {
	What string
	obj  client.Object
	key  client.ObjectKey
	done func(client.Object) bool
}

// SampleSteadyStates lists the steady state of every sample of config/samples that has one.
func SampleSteadyStates() []SteadyState {
	ready := func(conds func(client.Object) []metav1.Condition) func(client.Object) bool {
		return func(o client.Object) bool { return meta.IsStatusConditionTrue(conds(o), "Ready") }
	}
	return []SteadyState{
		{"AgentDeployment my-agent Running", &agentraxv1alpha1.AgentDeployment{}, client.ObjectKey{Namespace: "default", Name: "my-agent"},
			func(o client.Object) bool {
				return o.(*agentraxv1alpha1.AgentDeployment).Status.Phase == agentraxv1alpha1.PhaseRunning
			}},
		{"Fleet Pipeline self-monitoring Ready", &fleetv1alpha1.Pipeline{}, client.ObjectKey{Namespace: "default", Name: "self-monitoring"},
			ready(func(o client.Object) []metav1.Condition { return o.(*fleetv1alpha1.Pipeline).Status.Conditions })},
		{"Fleet Collector edge-collector-1 Ready", &fleetv1alpha1.Collector{}, client.ObjectKey{Namespace: "default", Name: "edge-collector-1"},
			ready(func(o client.Object) []metav1.Condition { return o.(*fleetv1alpha1.Collector).Status.Conditions })},
		{"gNMIc Cluster core Ready", &gnmicv1alpha1.Cluster{}, client.ObjectKey{Namespace: "default", Name: "core"},
			ready(func(o client.Object) []metav1.Condition { return o.(*gnmicv1alpha1.Cluster).Status.Conditions })},
		{"TargetSource lab-inventory Ready", &gnmicv1alpha1.TargetSource{}, client.ObjectKey{Namespace: "default", Name: "lab-inventory"},
			ready(func(o client.Object) []metav1.Condition { return o.(*gnmicv1alpha1.TargetSource).Status.Conditions })},
		collectorResourceSteady("Subscription interfaces", &gnmicv1alpha1.Subscription{}, "interfaces", "core-telemetry"),
		collectorResourceSteady("Output prometheus", &gnmicv1alpha1.Output{}, "prometheus", "core-telemetry"),
		collectorResourceSteady("Processor trim-prefixes", &gnmicv1alpha1.Processor{}, "trim-prefixes", "core-telemetry"),
		collectorResourceSteady("Input nats-telemetry", &gnmicv1alpha1.Input{}, "nats-telemetry"),
		collectorResourceSteady("TunnelTargetPolicy srl-leaves", &gnmicv1alpha1.TunnelTargetPolicy{}, "srl-leaves"),
		{"gitops Platform main Ready", &gitopsv1alpha1.Platform{}, client.ObjectKey{Namespace: "default", Name: "main"},
			ready(func(o client.Object) []metav1.Condition { return o.(*gitopsv1alpha1.Platform).Status.Conditions })},
		{"gitops Tenant team-demo Ready", &gitopsv1alpha1.Tenant{}, client.ObjectKey{Name: "team-demo"},
			ready(func(o client.Object) []metav1.Condition { return o.(*gitopsv1alpha1.Tenant).Status.Conditions })},
	}
}

// collectorStatus is a gNMIc collector-configuration object (Subscription, Output, Input, Processor,
// TunnelTargetPolicy).
type collectorStatus interface {
	client.Object
	CollectorStatus() *gnmicv1alpha1.CollectorResourceStatus
}

// collectorResourceSteady is a gNMIc collector-configuration sample Ready for its generation and listing exactly
// the sample Pipelines that reference it.
func collectorResourceSteady(what string, obj collectorStatus, name string, pipelines ...string) SteadyState {
	if len(pipelines) > 0 {
		what += " used by " + strings.Join(pipelines, ", ")
	}
	return SteadyState{what + " Ready", obj, client.ObjectKey{Namespace: "default", Name: name}, func(o client.Object) bool {
		s := o.(collectorStatus).CollectorStatus()
		return s.ObservedGeneration == o.GetGeneration() && meta.IsStatusConditionTrue(s.Conditions, "Ready") &&
			slices.Equal(s.Pipelines, pipelines)
	}}
}

// WaitConverged waits up to timeout until every sample reached its steady state through the real controllers,
// calling reached for each as it does; it returns the ones that did not.
func WaitConverged(ctx context.Context, c client.Client, timeout time.Duration, reached func(what string, after time.Duration)) []string {
	pending := SampleSteadyStates()
	started := time.Now()
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		left := pending[:0]
		for _, s := range pending {
			if err := c.Get(ctx, s.key, s.obj); err == nil && s.done(s.obj) {
				if reached != nil {
					reached(s.What, time.Since(started))
				}
				continue
			}
			left = append(left, s)
		}
		pending = left
		return len(pending) == 0, nil
	})
	var missing []string
	for _, s := range pending {
		missing = append(missing, s.What)
	}
	return missing
}
