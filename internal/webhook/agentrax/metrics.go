package agentrax

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// ledgerCalls counts the API calls of quota admission by kind, so that the cost of the reservation
	// ledger (and of foreign writes that make a write lose) is visible.
	ledgerCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrax_quota_ledger_calls_total",
		Help: "API calls of AgentDeployment quota admission: read (TenantQuota read), write (ledger written), conflict (write lost to another writer).",
	}, []string{"call"})
	// ledgerGroupSize is how many admissions one ledger decision served.
	ledgerGroupSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agentrax_quota_ledger_group_size",
		Help:    "Admissions decided together by one quota ledger commit.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
	})
)

func init() {
	metrics.Registry.MustRegister(ledgerCalls, ledgerGroupSize)
}
