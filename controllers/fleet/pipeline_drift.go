package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	pipelinev1 "github.com/grafana/fleet-management-api/api/gen/proto/go/pipeline/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	fleetclient "github.com/quartet-dev/quartet-operator/internal/fleet/client"
	"github.com/quartet-dev/quartet-operator/internal/fleet/pipelines"
)

// DriftCaller names the drift check's Fleet calls (fleetclient.WithCaller).
const DriftCaller = "drift-check"

// DefaultDriftInterval is how often managed pipelines are compared with what Fleet holds (--fleet-drift-interval).
const DefaultDriftInterval = 10 * time.Minute

var driftTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "fleet_pipeline_drift_total",
	Help: "Managed pipelines found changed (or deleted) in Fleet Management outside the operator, by field " +
		"(name, contents, matchers, enabled, configType, source, deleted); each is then restored from its Pipeline CR.",
}, []string{"field"})

func init() { metrics.Registry.MustRegister(driftTotal) }

// drift is the set of Pipelines whose Fleet pipeline was found changed, with the fields, until a write restores
// them. It is in memory on purpose: a restarted manager finds the drift again on its first check, and the skip rule
// must not depend on a status write reaching the cache before the reconcile it triggers.
type drift struct {
	mu     sync.Mutex
	fields map[client.ObjectKey][]string
	events chan event.GenericEvent
}

func (d *drift) mark(key client.ObjectKey, fields []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fields == nil {
		d.fields = map[client.ObjectKey][]string{}
	}
	d.fields[key] = fields
}

func (d *drift) of(key client.ObjectKey) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fields[key]
}

func (d *drift) clear(key client.ObjectKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.fields, key)
}

// driftCheck is the leader-only loop that compares, every interval, the managed Pipelines with one ListPipelines
// call (never a GetPipeline per pipeline: the whole check costs one request of the shared budget).
func (r *PipelineReconciler) driftCheck() manager.RunnableFunc {
	return func(ctx context.Context) error {
		interval := r.DriftInterval
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ticker.C:
				if err := r.checkDrift(ctx); err != nil {
					// The next tick tries again; a 401 already dropped the client (fleetclient.Provider).
					logf.FromContext(ctx).Info("fleet pipeline drift check failed; trying again on the next interval",
						"interval", interval, "error", err.Error())
				}
			}
		}
	}
}

// checkDrift lists Fleet once and marks (and enqueues) each synced managed Pipeline whose pipeline differs.
func (r *PipelineReconciler) checkDrift(ctx context.Context) error {
	list := &fleetv1alpha1.PipelineList{}
	if err := r.List(ctx, list); err != nil {
		return err
	}
	var candidates []*fleetv1alpha1.Pipeline
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp.IsZero() && pipelines.ModeOf(p) == pipelines.ModeManaged && p.Status.ID != "" &&
			meta.IsStatusConditionTrue(p.Status.Conditions, fleetv1alpha1.ConditionReady) && p.Status.ObservedGeneration == p.Generation {
			candidates = append(candidates, p)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	fc, err := r.Fleet.Client(ctx)
	if err != nil {
		return err
	}
	all, err := fc.ListPipelines(fleetclient.WithCaller(ctx, DriftCaller), &pipelinev1.ListPipelinesRequest{})
	if err != nil {
		if fleetclient.IsRateLimited(err) {
			return fmt.Errorf("rate limited (Retry-After %s, below the interval): %w", rateLimitWait(err), err)
		}
		return err
	}
	byID := make(map[string]*pipelinev1.Pipeline, len(all))
	for _, fp := range all {
		byID[fp.GetId()] = fp
	}
	for _, p := range candidates {
		fields := pipelines.Drift(pipelines.ToProto(p, pipelines.FleetName(p, r.NameScope)), byID[p.Status.ID])
		if len(fields) == 0 {
			continue
		}
		for _, f := range fields {
			driftTotal.WithLabelValues(f).Inc()
		}
		r.drift.mark(client.ObjectKeyFromObject(p), fields)
		select {
		case r.drift.events <- event.GenericEvent{Object: p}:
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// driftRepaired reports a repaired drift on the Pipeline and forgets it.
func (r *PipelineReconciler) driftRepaired(p *fleetv1alpha1.Pipeline, fields []string) {
	r.drift.clear(client.ObjectKeyFromObject(p))
	r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "DriftRepaired", "Upsert",
		"Fleet pipeline %q (ID %s) was changed outside the operator (%s); restored from this Pipeline",
		p.Status.SyncedName, p.Status.ID, strings.Join(fields, ", "))
}
