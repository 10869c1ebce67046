// Package agentrax holds the reconcilers of the agentrax.io group: AgentDeployment (workloads, autoscaling,
// monitoring, registry) and TenantQuota (usage, OverQuota, the reservation ledger).
package agentrax

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

var (
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrax_reconcile_duration_seconds",
		Help:    "Wall-clock duration of agentrax reconciles, by controller and tenant (namespace).",
		Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10},
	}, []string{"controller", "tenant"})
	quotaUsageRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentrax_tenant_quota_usage_ratio",
		Help: "usedTotalReplicas / maxTotalReplicas of a TenantQuota, by tenant (namespace).",
	}, []string{"tenant"})
	// agentPhase lets alerts see failed and stuck rollouts and degraded agents: status.phase exists only in the
	// API, and a rollout that hangs writes no event a rule could count.
	agentPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentrax_agentdeployment_phase",
		Help: "1 for the current status.phase of an AgentDeployment, 0 for the other phases.",
	}, []string{"namespace", "name", "phase"})
)

func init() {
	metrics.Registry.MustRegister(reconcileDuration, quotaUsageRatio, agentPhase)
}

var allPhases = []agentraxv1alpha1.Phase{agentraxv1alpha1.PhasePending, agentraxv1alpha1.PhaseRunning,
	agentraxv1alpha1.PhaseRolloutInProgress, agentraxv1alpha1.PhaseRolloutFailed, agentraxv1alpha1.PhaseDegraded}

// recordPhase publishes the agent's phase; an agent without one yet publishes nothing.
func recordPhase(ad *agentraxv1alpha1.AgentDeployment) {
	if ad.Status.Phase == "" {
		return
	}
	for _, p := range allPhases {
		v := 0.0
		if p == ad.Status.Phase {
			v = 1
		}
		agentPhase.WithLabelValues(ad.Namespace, ad.Name, string(p)).Set(v)
	}
}

// forgetAgentMetrics drops the series of a deleted AgentDeployment.
func forgetAgentMetrics(namespace, name string) {
	agentPhase.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
}

// startReconcile opens the agentrax.reconcile span and returns a function that ends it and records the
// reconcile's duration on every exit path.
func startReconcile(ctx context.Context, controller, namespace, name string) (context.Context, func(error)) {
	start := time.Now()
	ctx, span := telemetry.StartSpan(ctx, "agentrax", "agentrax.reconcile",
		attribute.String("agentrax.controller", controller),
		attribute.String("k8s.namespace", namespace),
		attribute.String("k8s.name", name))
	return ctx, func(err error) {
		reconcileDuration.WithLabelValues(controller, namespace).Observe(time.Since(start).Seconds())
		telemetry.EndSpan(span, err)
	}
}

// tenantRefField indexes AgentDeployments by spec.tenantRef.
const tenantRefField = "spec.tenantRef"

func tenantRefOf(o client.Object) []string {
	return []string{o.(*agentraxv1alpha1.AgentDeployment).Spec.TenantRef}
}
