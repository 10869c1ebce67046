// Package hpareal checks the autoscaling arithmetic of AgentDeployments through the whole real chain: the
// operator writes each agent's HorizontalPodAutoscaler, a real Prometheus (Debian's package, as in test/promreal)
// scrapes loopback servers playing the agent's pods, prometheus-adapter v0.12.0 (built from Go modules by `make
// prometheus-adapter`) serves the external metrics API with the adapter rules this repository ships
// (config/components/agentrax-prometheus-adapter), registered as an APIService the API server reaches through
// the cluster's Service routing, and the real HPA controller of the cluster-grade control plane computes the
// desired replicas. Its own package: every other cluster suite has no external metrics API on purpose.
package hpareal

import (
	"os"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"

	"github.com/quartet-dev/quartet-operator/controllers/agentrax"
	"github.com/quartet-dev/quartet-operator/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The seed's stabilization windows and rate limits hold a change back for minutes; what is checked here is
	// the desired replica count the HPA computes from the metric, so let every recommendation through at once.
	immediate := &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PodsScalingPolicy, Value: 100, PeriodSeconds: 1}},
	}
	agentrax.DefaultHPABehavior = autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: immediate, ScaleDown: immediate.DeepCopy()}
	os.Exit(testenv.Main(m, &env, testenv.Options{
		Controllers: []string{agentrax.AgentDeploymentControllerName, agentrax.TenantQuotaControllerName},
		// The HPA controller syncs every 2 s (ClusterOptions' default).
		Cluster: &testenv.ClusterOptions{},
	}))
}
