// Package fleet holds the reconcilers of the fleetmanagement.grafana.com group.
package fleet

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
)

var (
	syncedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fleet_resource_synced_total",
		Help: "Outcomes of fleet reconciles that reached Fleet Management, by kind and reason " +
			"(Synced, SyncFailed, ValidationError, RateLimited, NotRegistered, Recreated, Deleted, DeleteFailed).",
	}, []string{"kind", "reason"})

	lastSuccess = map[string]*atomic.Int64{}
)

// syncOutcomes are the reasons each kind counts in fleet_resource_synced_total. They start at zero when the
// kind's controller is set up (initSyncOutcomes), so rate() and increase() in the alerts see the first failure of
// a kind (a series born at 1 has no increase) and a dashboard shows 0 rather than nothing.
var syncOutcomes = map[string][]string{
	"Pipeline": {fleetv1alpha1.ReasonSynced, fleetv1alpha1.ReasonSyncFailed, fleetv1alpha1.ReasonValidationError,
		fleetv1alpha1.ReasonRateLimited, fleetv1alpha1.ReasonNameTaken, fleetv1alpha1.ReasonGrafanaManaged,
		fleetv1alpha1.ReasonOwnedElsewhere, fleetv1alpha1.ReasonPipelineGone, "Recreated", "Deleted", fleetv1alpha1.ReasonDeleteFailed},
	"Collector": {fleetv1alpha1.ReasonSynced, fleetv1alpha1.ReasonSyncFailed, fleetv1alpha1.ReasonValidationError,
		fleetv1alpha1.ReasonRateLimited, fleetv1alpha1.ReasonIDClaimed, fleetv1alpha1.ReasonNotRegistered, "Deleted",
		fleetv1alpha1.ReasonDeleteFailed},
	"PipelineDiscovery": {fleetv1alpha1.ReasonSynced, fleetv1alpha1.ReasonListFailed, fleetv1alpha1.ReasonRateLimited,
		fleetv1alpha1.ReasonEmptyResult, fleetv1alpha1.ReasonCRWriteFailed},
	"CollectorDiscovery": {fleetv1alpha1.ReasonSynced, fleetv1alpha1.ReasonListFailed, fleetv1alpha1.ReasonRateLimited,
		fleetv1alpha1.ReasonEmptyResult, fleetv1alpha1.ReasonCRWriteFailed},
}

func init() {
	metrics.Registry.MustRegister(syncedTotal)
	for _, kind := range []string{"Pipeline", "Collector", "PipelineDiscovery", "CollectorDiscovery"} {
		last := &atomic.Int64{}
		lastSuccess[kind] = last
		metrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "fleet_resource_sync_age_seconds",
			Help:        "Seconds since the last successful Fleet Management sync of any resource of the kind (0 before the first).",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 {
			t := last.Load()
			if t == 0 {
				return 0
			}
			return time.Since(time.Unix(0, t)).Seconds()
		}))
	}
}

// initSyncOutcomes starts the outcomes of a kind at zero. It runs at controller setup rather than in init, so
// only a process running the kind's controller (the manager, not katastroma, which links this package) serves them.
func initSyncOutcomes(kind string) {
	for _, reason := range syncOutcomes[kind] {
		syncedTotal.WithLabelValues(kind, reason)
	}
}

// recordSync counts an outcome; a Synced outcome also resets the kind's sync age.
func recordSync(kind, reason string) {
	syncedTotal.WithLabelValues(kind, reason).Inc()
	if reason == "Synced" {
		if last := lastSuccess[kind]; last != nil {
			last.Store(time.Now().UnixNano())
		}
	}
}

var ownedKeysGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "fleet_external_sync_owned_keys",
	Help: "Collectors an ExternalAttributeSync claims attributes on (status.ownedKeys entries).",
}, []string{"namespace", "name"})

func init() { metrics.Registry.MustRegister(ownedKeysGauge) }

var discoveryResultSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "fleet_discovery_list_collectors_result_size",
	Help: "Collectors the last ListCollectors call of a CollectorDiscovery returned.",
}, []string{"namespace", "name"})

func init() { metrics.Registry.MustRegister(discoveryResultSize) }
