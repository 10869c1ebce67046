package source

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
	"github.com/quartet-dev/quartet-operator/internal/gitops/stage"
)

// EventReconcile is a periodic re-run of a source target's deployed commit (drift correction).
const EventReconcile = "reconcile"

// DataReconcileInterval is the source-target data key of its reconcile interval (a Go duration; "0" disables).
const DataReconcileInterval = "reconcile-interval"

// DefaultReconcileInterval applies when a source target names none.
const DefaultReconcileInterval = 10 * time.Minute

// ReconcileInterval parses a source target's interval: empty is the default, "0" (or any zero duration) turns
// periodic reconciles off, anything else must be a positive Go duration.
func ReconcileInterval(cm *corev1.ConfigMap) (time.Duration, error) {
	v, ok := cm.Data[DataReconcileInterval]
	if !ok || v == "" {
		return DefaultReconcileInterval, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("source target %s/%s: %s %q is not a non-negative duration", cm.Namespace, cm.Name,
			DataReconcileInterval, v)
	}
	return d, nil
}

// reconciler remembers when each source target last ran, in memory: after a restart every target waits one
// interval, so a restart does not start every target at once.
type reconciler struct {
	mu   sync.Mutex
	last map[string]time.Time
	// deleting is when the prune of each deleted target last started (deletion.go).
	deleting map[string]time.Time
}

// Reconcile re-runs, every tick, the source targets whose interval passed since this handler last saw them run:
// each re-deploys the commit its inventory records (deployed-commit), which lets the provisioner repair drift.
// A target with an active lease is left to that event; one never deployed is skipped. It returns when ctx ends.
func (h *Handler) Reconcile(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.reconcileDue(ctx, time.Now())
		}
	}
}

func (h *Handler) reconcileDue(ctx context.Context, now time.Time) {
	logger := log.FromContext(ctx)
	var l corev1.ConfigMapList
	if err := h.Client.List(ctx, &l, client.MatchingLabels{pipeline.LabelType: pipeline.TypeSourceTarget}); err != nil {
		logger.Error(err, "listing source targets for the periodic reconcile")
		return
	}
	h.rec.mu.Lock()
	if h.rec.last == nil {
		h.rec.last, h.rec.deleting = map[string]time.Time{}, map[string]time.Time{}
	}
	h.rec.mu.Unlock()
	h.deletions(ctx, l.Items, now)
	h.rec.mu.Lock()
	var due []*corev1.ConfigMap
	for i := range l.Items {
		cm := &l.Items[i]
		key := cm.Namespace + "/" + cm.Name
		if !cm.DeletionTimestamp.IsZero() {
			continue // deletion.go prunes it instead
		}
		interval, err := ReconcileInterval(cm)
		if err != nil {
			logger.Info("skipping the periodic reconcile", "error", err.Error())
			continue
		}
		last, seen := h.rec.last[key]
		switch {
		case !seen || h.Lease.Active(cm, now):
			h.rec.last[key] = now
		case interval > 0 && now.Sub(last) >= interval && cm.Annotations[pipeline.AnnotationDeployed] != "":
			h.rec.last[key] = now
			due = append(due, cm)
		}
	}
	h.rec.mu.Unlock()
	for _, cm := range due {
		if err := h.startTargetEvent(ctx, cm, EventReconcile, false); err != nil {
			logger.Info("periodic reconcile not started", "sourceTarget", cm.Namespace+"/"+cm.Name, "reason", err.Error())
		}
	}
}

// startTargetEvent takes the lease of an idle target (a concurrent event makes the update conflict and wins)
// and runs its deployed commit as a new event of kind: a periodic reconcile, or the offboarding of a deleted
// target (offboard: no clone, an empty desired set, the pruner removes everything its inventory lists).
func (h *Handler) startTargetEvent(ctx context.Context, cm *corev1.ConfigMap, kind string, offboard bool) error {
	t, err := TargetFromConfigMap(cm)
	if err != nil && !offboard {
		return err
	}
	t.Offboard = t.Offboard || offboard
	commit := cm.Annotations[pipeline.AnnotationDeployed]
	attrs := []attribute.KeyValue{attribute.String("commit", commit)}
	if offboard {
		attrs = deletionEventAttrs(cm)
	}
	ectx, span := startEvent(kind, h.Tenant(ctx, cm.Namespace), attrs...)
	ectx = contextWith(h.baseCtx(), ectx)
	jctx, jspan, leaseID := startTarget(ectx, t)
	eventID := jspan.SpanContext().TraceID().String()
	cm = cm.DeepCopy()
	setLease(cm, leaseID, time.Now())
	if prev := cm.Annotations[pipeline.AnnotationEventID]; prev != "" && prev != eventID {
		cm.Annotations[pipeline.AnnotationPrevEvent] = prev
	}
	cm.Annotations[pipeline.AnnotationEventID] = eventID
	cm.Annotations[pipeline.AnnotationEventCommit] = commit
	cm.Annotations[pipeline.AnnotationReplayCount] = "0"
	delete(cm.Annotations, pipeline.AnnotationResult)
	if err := h.Client.Update(ctx, cm); err != nil {
		if apierrors.IsConflict(err) {
			err = fmt.Errorf("the source target changed while taking the lease: %w", err)
		}
		stage.End(jspan, nil)
		stage.End(span, nil)
		return err
	}
	jspan.SetAttributes(attribute.String("lease.id", leaseID), attribute.String("commit", commit))
	h.inflight.Add(1)
	go func() {
		defer h.inflight.Done()
		h.runEvent(span, []*job{{target: t, commit: commit, ctx: jctx, span: jspan, leaseID: leaseID}}, nil)
	}()
	return nil
}
