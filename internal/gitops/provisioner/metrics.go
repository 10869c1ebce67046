package provisioner

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Tenant-labelled outcomes of the provisioner, for the per-tenant dashboards the Tenant controller writes. The
// stage metrics (katastroma_stage_*) carry no tenant: these two are what a tenant asks about its own events.
var (
	driftRepaired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "katastroma_provisioner_drift_repaired_total",
		Help: "Objects whose live state had drifted from the commit and that the provisioner applied again, by tenant.",
	}, []string{"tenant"})
	verifies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "katastroma_provisioner_verifies_total",
		Help: "Health verifies after a complete apply, by tenant and outcome (healthy, failed, timed-out, aborted).",
	}, []string{"tenant", "outcome"})
)

// Verify outcomes, the values of katastroma_provisioner_verifies_total's outcome label.
const (
	VerifyHealthy  = "healthy"
	VerifyFailed   = "failed"
	VerifyTimedOut = "timed-out"
	// VerifyAborted: the verify ended before an answer (the lease moved, the call was cancelled, reads failed).
	VerifyAborted = "aborted"
)

func init() { ctrlmetrics.Registry.MustRegister(driftRepaired, verifies) }

// initTenantMetrics starts a tenant's counters at zero when the provisioner first handles one of its events, so
// a tenant's dashboard shows 0 and rate() sees its first repair or failed verify.
func initTenantMetrics(tenant string) {
	driftRepaired.WithLabelValues(tenant)
	for _, outcome := range []string{VerifyHealthy, VerifyFailed, VerifyTimedOut, VerifyAborted} {
		verifies.WithLabelValues(tenant, outcome)
	}
}
