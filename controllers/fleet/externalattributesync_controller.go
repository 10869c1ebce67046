package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	fleetv1alpha1 "github.com/quartet-dev/quartet-operator/apis/fleet/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/fleet/extsync"
	"github.com/quartet-dev/quartet-operator/internal/fleet/selector"
	"github.com/quartet-dev/quartet-operator/internal/kube"
	"github.com/quartet-dev/quartet-operator/internal/telemetry"
)

// ExternalAttributeSyncControllerName is the controller name, unique across groups.
const ExternalAttributeSyncControllerName = "fleet-externalattributesync"

// ExternalAttributeSyncReconciler runs each sync on its schedule and records the attributes it claims in
// status.ownedKeys; the Collector controller applies them with its precedence. It makes no Fleet call itself.
type ExternalAttributeSyncReconciler struct {
	client.Client
	// APIReader reads Secrets directly: the manager never caches them.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// HTTP fetches HTTP sources through the SSRF guard and the per-host rate limiter.
	HTTP *extsync.HTTPSource
	// SQL tunes SQL sources.
	SQL extsync.SQLOptions
	// Clock is the time source; nil is the real clock.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is --controller-sync-max-concurrent.
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=externalattributesyncs,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=externalattributesyncs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetmanagement.grafana.com,resources=collectors,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Reconcile runs the sync when it is due (or its spec changed) and patches status once.
func (r *ExternalAttributeSyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &fleetv1alpha1.ExternalAttributeSync{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		if client.IgnoreNotFound(err) == nil {
			ownedKeysGauge.DeleteLabelValues(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	before := s.DeepCopy()
	res := r.run(ctx, s)
	ownedKeysGauge.WithLabelValues(s.Namespace, s.Name).Set(float64(len(s.Status.OwnedKeys)))
	return res, kube.PatchStatusIfChanged(ctx, r.Client, before, s)
}

func (r *ExternalAttributeSyncReconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

// run is the phases of one reconcile: schedule, fetch, map, guard, claim.
func (r *ExternalAttributeSyncReconciler) run(ctx context.Context, s *fleetv1alpha1.ExternalAttributeSync) ctrl.Result {
	sched, err := extsync.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		s.Status.ObservedGeneration = s.Generation
		r.notReady(s, fleetv1alpha1.ReasonInvalidSchedule, err.Error())
		return ctrl.Result{}
	}
	now := r.now()
	if wait := r.untilDue(s, sched, now); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}
	}
	t := metav1.NewTime(now)
	s.Status.LastSyncTime = &t
	s.Status.ObservedGeneration = s.Generation
	next := ctrl.Result{RequeueAfter: sched.Next(now).Sub(now)}

	records, err := r.fetch(ctx, s)
	if err != nil {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonSourceFailed, "Sync", "%v", err)
		r.notReady(s, fleetv1alpha1.ReasonSourceFailed, err.Error())
		return next
	}
	result, err := r.mapRecords(ctx, s, records)
	if err != nil {
		r.notReady(s, fleetv1alpha1.ReasonSourceFailed, err.Error())
		return next
	}
	s.Status.RecordsSeen, s.Status.RecordsApplied = int32(result.Seen), int32(result.Applied)
	if result.Seen == 0 && !s.Spec.AllowEmptyResults && len(s.Status.OwnedKeys) > 0 {
		// An emptied source is more often an outage than an intent: keep the claim until a human decides.
		msg := "the source returned no records; keeping the previous attributes (set allowEmptyResults to accept an empty source)"
		if !meta.IsStatusConditionTrue(s.Status.Conditions, fleetv1alpha1.ConditionStalled) {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonStalled, "Sync", "%s", msg)
		}
		setCondition(s, fleetv1alpha1.ConditionStalled, metav1.ConditionTrue, fleetv1alpha1.ReasonStalled, msg)
		r.notReady(s, fleetv1alpha1.ReasonStalled, msg)
		return next
	}
	setCondition(s, fleetv1alpha1.ConditionStalled, metav1.ConditionFalse, fleetv1alpha1.ReasonNotStalled, "the last run returned records or empty results are allowed")
	owned, err := extsync.Owned(result.Attributes)
	if errors.Is(err, extsync.ErrTooManyOwned) {
		// Fail closed: a partial claim would remove attributes from the collectors left out.
		s.Status.OwnedKeys = nil
		if !meta.IsStatusConditionTrue(s.Status.Conditions, fleetv1alpha1.ConditionTruncated) {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, fleetv1alpha1.ReasonOwnedKeysExceeded, "Sync", "%v; the sync claims nothing", err)
		}
		setCondition(s, fleetv1alpha1.ConditionTruncated, metav1.ConditionTrue, fleetv1alpha1.ReasonOwnedKeysExceeded, err.Error()+"; the sync claims nothing")
		r.notReady(s, fleetv1alpha1.ReasonOwnedKeysExceeded, err.Error())
		return next
	}
	s.Status.OwnedKeys = owned
	s.Status.LastSuccessTime = &t
	setCondition(s, fleetv1alpha1.ConditionTruncated, metav1.ConditionFalse, fleetv1alpha1.ReasonNotTruncated, "every claimed attribute is recorded")
	msg := fmt.Sprintf("%d record(s) read, %d applied to %d collector(s)", result.Seen, result.Applied, len(owned))
	if !meta.IsStatusConditionTrue(s.Status.Conditions, fleetv1alpha1.ConditionReady) {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, fleetv1alpha1.ReasonSynced, "Sync", "%s", msg)
	}
	setCondition(s, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, msg)
	setCondition(s, fleetv1alpha1.ConditionSynced, metav1.ConditionTrue, fleetv1alpha1.ReasonSynced, msg)
	return next
}

// untilDue is how long until the next run; 0 when due now. A spec change makes the sync due at once.
func (r *ExternalAttributeSyncReconciler) untilDue(s *fleetv1alpha1.ExternalAttributeSync, sched extsync.Schedule, now time.Time) time.Duration {
	if s.Status.LastSyncTime == nil || s.Status.ObservedGeneration != s.Generation {
		return 0
	}
	return sched.Next(s.Status.LastSyncTime.Time).Sub(now)
}

func (r *ExternalAttributeSyncReconciler) notReady(s *fleetv1alpha1.ExternalAttributeSync, reason, msg string) {
	setCondition(s, fleetv1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	setCondition(s, fleetv1alpha1.ConditionSynced, metav1.ConditionFalse, reason, msg)
}

// fetch reads the source's records with the Secret's credentials.
func (r *ExternalAttributeSyncReconciler) fetch(ctx context.Context, s *fleetv1alpha1.ExternalAttributeSync) ([]extsync.Record, error) {
	secret := map[string][]byte{}
	if ref := s.Spec.Source.SecretRef; ref != nil {
		sec := &corev1.Secret{}
		// Only the sync's own namespace, whatever the reference says (admission refuses others too).
		if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}, sec); err != nil {
			return nil, fmt.Errorf("reading Secret %s/%s: %w", s.Namespace, ref.Name, err)
		}
		secret = sec.Data
	}
	switch {
	case s.Spec.Source.Kind == fleetv1alpha1.SourceKindHTTP && s.Spec.Source.HTTP != nil:
		return r.HTTP.Fetch(ctx, s.Spec.Source.HTTP, extsync.Credentials{
			BearerToken: string(secret[fleetv1alpha1.SecretKeyBearerToken]),
			Username:    string(secret[fleetv1alpha1.SecretKeyUsername]),
			Password:    string(secret[fleetv1alpha1.SecretKeyPassword]),
		})
	case s.Spec.Source.Kind == fleetv1alpha1.SourceKindSQL && s.Spec.Source.SQL != nil:
		q := s.Spec.Source.SQL
		// Checked again here: admission may have been bypassed or the rules may have tightened since.
		if err := extsync.CheckSelectQuery(q.Driver, q.Query); err != nil {
			return nil, err
		}
		dsn := string(secret[fleetv1alpha1.SecretKeyDSN])
		if dsn == "" {
			return nil, fmt.Errorf("the Secret has no %q key", fleetv1alpha1.SecretKeyDSN)
		}
		return extsync.QuerySQL(ctx, q.Driver, dsn, q.Query, r.SQL)
	}
	return nil, fmt.Errorf("source kind %q has no matching source", s.Spec.Source.Kind)
}

// mapRecords maps records to the selected collectors. The selector sees the namespace's Collector CR for an ID
// (local attributes, spec attributes, collector.id), or only collector.id when there is none yet.
func (r *ExternalAttributeSyncReconciler) mapRecords(ctx context.Context, s *fleetv1alpha1.ExternalAttributeSync, records []extsync.Record) (extsync.Result, error) {
	sel, err := selector.Compile(s.Spec.Selector)
	if err != nil {
		return extsync.Result{}, err
	}
	byID := map[string]*fleetv1alpha1.Collector{}
	cols := &fleetv1alpha1.CollectorList{}
	if err := r.List(ctx, cols, client.InNamespace(s.Namespace)); err != nil {
		return extsync.Result{}, err
	}
	for i := range cols.Items {
		byID[cols.Items[i].Spec.ID] = &cols.Items[i]
	}
	return extsync.Map(records, s.Spec.Mapping, func(id string) bool {
		if c, ok := byID[id]; ok {
			return sel.MatchesCollector(c)
		}
		return sel.Matches(id, map[string]string{selector.CollectorIDKey: id})
	}), nil
}

// SetupWithManager registers the controller: spec changes wake it, the schedule requeues it, its own status
// writes do not.
func (r *ExternalAttributeSyncReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := indexCollectors(ctx, mgr); err != nil {
		return err
	}
	if err := indexSyncs(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ExternalAttributeSyncControllerName).
		For(&fleetv1alpha1.ExternalAttributeSync{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(kube.ControllerOptions{MaxConcurrentReconciles: r.MaxConcurrentReconciles}.Options()).
		Complete(telemetry.TracedReconciler(ExternalAttributeSyncControllerName, r))
}
