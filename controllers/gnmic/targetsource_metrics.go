package gnmic

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of a TargetSource run, as counted by gnmic_operator_targetsource_sync_total.
const (
	syncResultSuccess = "success"
	syncResultFailure = "failure"
	syncResultHeld    = "held"
)

var (
	targetSourceSyncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gnmic_operator_targetsource_sync_duration_seconds",
		Help:    "Duration of TargetSource runs: fetch, mapping, apply and prune.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	}, []string{"namespace", "name", "type"})
	targetSourceSyncTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gnmic_operator_targetsource_sync_total",
		Help: "TargetSource runs by result: success, failure, or held (a prune guard held the deletions).",
	}, []string{"namespace", "name", "type", "result"})
	targetSourceLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gnmic_operator_targetsource_last_success_timestamp_seconds",
		Help: "Unix time of the TargetSource's last successful run. Alert when it does not move for three intervals.",
	}, []string{"namespace", "name"})
	targetSourceTargets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gnmic_operator_targetsource_targets",
		Help: "Devices of a TargetSource by state: managed, invalid or conflicted.",
	}, []string{"namespace", "name", "state"})
	// targetSourceInterval lets the staleness alert compare the last-success age with each source's own interval.
	targetSourceInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gnmic_operator_targetsource_interval_seconds",
		Help: "spec.interval of a TargetSource that is not suspended (absent while suspended).",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(targetSourceSyncDuration, targetSourceSyncTotal, targetSourceLastSuccess,
		targetSourceTargets, targetSourceInterval)
}

// recordTargetSourceInterval publishes the interval; 0 (suspended) removes it, so a suspended source cannot alert.
func recordTargetSourceInterval(namespace, name string, interval time.Duration) {
	if interval <= 0 {
		targetSourceInterval.DeleteLabelValues(namespace, name)
		return
	}
	targetSourceInterval.WithLabelValues(namespace, name).Set(interval.Seconds())
}

// initTargetSourceResults starts every run result of a source at zero, so the failing alert's increase() sees
// its first failed run.
func initTargetSourceResults(namespace, name, sourceType string) {
	for _, result := range []string{syncResultSuccess, syncResultFailure, syncResultHeld} {
		targetSourceSyncTotal.WithLabelValues(namespace, name, sourceType, result)
	}
}

// forgetTargetSourceMetrics drops the series of a deleted TargetSource.
func forgetTargetSourceMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "name": name}
	targetSourceSyncDuration.DeletePartialMatch(labels)
	targetSourceSyncTotal.DeletePartialMatch(labels)
	targetSourceLastSuccess.DeletePartialMatch(labels)
	targetSourceTargets.DeletePartialMatch(labels)
	targetSourceInterval.DeletePartialMatch(labels)
}
