package client

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Buckets of the client's histograms. Fleet calls usually take tens of milliseconds; the limiter wait reaches
// minutes when a thousand objects queue at 3 requests per second.
var (
	DurationBuckets    = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	LimiterWaitBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
)

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_api_requests_total",
		Help: "Fleet Management API requests sent, by operation (RPC name).",
	}, []string{"operation"})
	errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_api_errors_total",
		Help: "Fleet Management API requests that failed, by operation and HTTP status.",
	}, []string{"operation", "status"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fleet_api_request_duration_seconds",
		Help:    "Fleet Management API request latency (after the rate limiter), by operation and HTTP status.",
		Buckets: DurationBuckets,
	}, []string{"operation", "status"})
	limiterWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fleet_api_rate_limiter_wait_duration_seconds",
		Help:    "Time Fleet Management API requests waited for the shared token bucket.",
		Buckets: LimiterWaitBuckets,
	})
)

func init() {
	metrics.Registry.MustRegister(requestsTotal, errorsTotal, requestDuration, limiterWait)
}
