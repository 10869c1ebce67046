package source

import (
	"context"
	"fmt"
	"hash/fnv"
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

// Annotations of the periodic poll.
const (
	// AnnotationSuspend set to "true" on a source target stops its polls, periodic reconciles and webhook events
	// (a Retrieve still runs it by hand), as Flux's spec.suspend does.
	AnnotationSuspend = "katastroma.org/suspend"
	// AnnotationReconcileRequested set to any new value (a timestamp, as `flux reconcile` writes) asks for a poll
	// now, whatever the interval; the event that answers copies it to AnnotationReconcileHandled.
	AnnotationReconcileRequested = "katastroma.org/reconcile-requested-at"
	AnnotationReconcileHandled   = "katastroma.org/reconcile-handled-at"
	// AnnotationHeadSeen is the head of the ref the last poll saw (written with the lease of the event it started).
	AnnotationHeadSeen = "katastroma.org/head-commit"
	// AnnotationPolledAt is when a source handler replica last claimed the target's poll (RFC3339): the replica
	// whose update at the listed resourceVersion succeeds polls, the others see the claim and wait an interval.
	AnnotationPolledAt = "katastroma.org/polled-at"
)

// EventPoll is a periodic event that found the head of the ref ahead of the deployed commit and deploys it.
const EventPoll = "poll"

// pollWorkers bounds the ref listings one tick runs at once.
const pollWorkers = 4

// reconciler remembers when each source target last ran, in memory, besides the poll claims every replica reads
// (AnnotationPolledAt): a target without a claim waits one interval after a restart, so a restart does not start
// every target at once, unless it is a renamed target that never ran (it deploys at once).
type reconciler struct {
	mu   sync.Mutex
	last map[string]time.Time
	// deleting is when the prune of each deleted target last started (deletion.go).
	deleting map[string]time.Time
}

// Reconcile polls, every tick, the source targets whose interval passed since this handler last saw them run: it
// lists the head of each target's ref (once per repository, credential and tick, under the git timeout) and runs
// the target at that head, which deploys a commit whose webhook was lost or failed, and otherwise re-applies the
// deployed commit so the provisioner repairs drift. A target with an active lease is left to that event. It
// returns when ctx ends.
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

// jitter spreads the polls of targets sharing an interval over its first tenth, the same for a target on every
// tick and every replica (a hash of its key), so a thousand targets registered together do not poll together.
func jitter(key string, interval time.Duration) time.Duration {
	if interval < 10*time.Second {
		return 0
	}
	f := fnv.New32a()
	_, _ = f.Write([]byte(key))
	return time.Duration(uint64(f.Sum32()) % uint64(interval/10))
}

// pollDue decides whether a target is due for its poll at now, given when this handler last ran it.
func pollDue(cm *corev1.ConfigMap, interval time.Duration, last time.Time, now time.Time) bool {
	if r := cm.Annotations[AnnotationReconcileRequested]; r != "" && r != cm.Annotations[AnnotationReconcileHandled] {
		return true
	}
	return interval > 0 && now.Sub(last) >= interval+jitter(cm.Namespace+"/"+cm.Name, interval)
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
	h.migrateOverrides(ctx, l.Items)
	h.deletions(ctx, l.Items, now)
	h.rec.mu.Lock()
	var due []*corev1.ConfigMap
	for i := range l.Items {
		cm := &l.Items[i]
		key := cm.Namespace + "/" + cm.Name
		if !cm.DeletionTimestamp.IsZero() || cm.Annotations[AnnotationSuspend] == "true" {
			continue // deletion.go prunes a deleted one instead
		}
		if servedHere(cm, h.Lease.Platform) != nil {
			continue // another Platform's source handler polls it; a claim here would delay that poll
		}
		interval, err := ReconcileInterval(cm)
		if err != nil {
			logger.Info("skipping the periodic reconcile", "error", err.Error())
			continue
		}
		last, seen := h.rec.last[key]
		if claimed, ok := polledAt(cm); ok && (!seen || claimed.After(last)) {
			last, seen = claimed, true // another replica's poll (or ours before a restart) counts
		}
		switch {
		case h.Lease.Active(cm, now):
			h.rec.last[key] = now
		case !seen && renamedNeverRan(cm):
			due = append(due, cm) // claimPolls records the time once the claim landed
		case !seen:
			h.rec.last[key] = now
		case pollDue(cm, interval, last, now):
			due = append(due, cm)
		}
	}
	h.rec.mu.Unlock()
	due = h.claimPolls(ctx, due, now)
	heads := h.pollHeads(ctx, due)
	for _, cm := range due {
		key := cm.Namespace + "/" + cm.Name
		head := heads[key]
		commit, kind := reconcileCommit(cm, head.sha)
		if head.err != nil {
			logger.Info("polling the head of the ref failed", "sourceTarget", key, "error", head.err.Error(),
				"fallback", commit)
		}
		if commit == "" {
			continue
		}
		if err := h.startTargetEvent(ctx, cm, kind, commit, head.sha, false); err != nil {
			logger.Info("periodic reconcile not started", "sourceTarget", key, "reason", err.Error())
		}
	}
}

// polledAt reads a target's poll claim.
func polledAt(cm *corev1.ConfigMap) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, cm.Annotations[AnnotationPolledAt])
	return t, err == nil
}

// renamedNeverRan: the target replaces another one (pipeline.AnnotationRenamedFrom) and no event ever took its
// lease. It deploys on the first pass instead of an interval later: the target it replaces is being deleted, and
// nothing else would run it before a push touches its path. (Other new targets wait their interval as after a
// restart, so registering a target right before its first push does not race the webhook's event.)
func renamedNeverRan(cm *corev1.ConfigMap) bool {
	return cm.Annotations[pipeline.AnnotationRenamedFrom] != "" && cm.Annotations[pipeline.AnnotationEventID] == "" &&
		cm.Annotations[pipeline.AnnotationDeployed] == ""
}

// claimPolls takes the poll of each due target for this replica: an update at the listed resourceVersion writing
// AnnotationPolledAt. Source handler replicas list the same targets on their own ticks; only the one whose update
// lands polls (lists the ref, starts the event), and the others then see the claim and wait the target's interval.
// A conflict (another replica's claim, an event's lease or release) drops the target from this tick without
// recording a poll, so the next tick looks again: it then finds the other replica's claim, or claims. Another
// failure waits an interval, as a poll would. The returned ConfigMaps carry the claim's resourceVersion, so the
// lease update of the event started next is fenced by it.
func (h *Handler) claimPolls(ctx context.Context, due []*corev1.ConfigMap, now time.Time) []*corev1.ConfigMap {
	logger := log.FromContext(ctx)
	out := make([]*corev1.ConfigMap, 0, len(due))
	for _, cm := range due {
		cm = cm.DeepCopy()
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[AnnotationPolledAt] = now.UTC().Format(time.RFC3339)
		err := h.Client.Update(ctx, cm)
		if err != nil && apierrors.IsConflict(err) {
			continue
		}
		h.rec.mu.Lock()
		h.rec.last[cm.Namespace+"/"+cm.Name] = now
		h.rec.mu.Unlock()
		if err != nil {
			logger.Info("claiming the poll failed", "sourceTarget", cm.Namespace+"/"+cm.Name, "error", err.Error())
			continue
		}
		out = append(out, cm)
	}
	return out
}

// reconcileCommit chooses what a due target runs: the head of its ref when the poll read it (a poll when it is
// not the deployed commit, a drift reconcile when it is). Without a head it completes the latest event's commit
// when that one did not deploy (a failed or crashed push), and otherwise re-applies the deployed commit: never a
// commit older than the latest one attempted, so a failed push is not reverted and recorded as a success. ""
// means nothing to run (never deployed, and the head unknown).
func reconcileCommit(cm *corev1.ConfigMap, head string) (commit, kind string) {
	deployed := cm.Annotations[pipeline.AnnotationDeployed]
	switch latest := cm.Annotations[pipeline.AnnotationEventCommit]; {
	case head != "" && head == deployed:
		return head, EventReconcile
	case head != "":
		return head, EventPoll
	case latest != "" && latest != deployed:
		return latest, EventReconcile
	}
	return deployed, EventReconcile
}

// headResult is the outcome of one target's ref listing.
type headResult struct {
	sha string
	err error
}

// pollHeads lists the head of every due target's ref: one listing per repository, credential Secret and
// namespace per tick (targets of a monorepo share it), at most pollWorkers at once, each under the git timeout.
func (h *Handler) pollHeads(ctx context.Context, due []*corev1.ConfigMap) map[string]headResult {
	type repoKey struct{ namespace, secret, repo, ref string }
	byRepo := map[repoKey][]string{}
	targets := map[repoKey]Target{}
	out := map[string]headResult{}
	for _, cm := range due {
		t, err := TargetFromConfigMap(cm)
		if err != nil {
			out[cm.Namespace+"/"+cm.Name] = headResult{err: err}
			continue
		}
		k := repoKey{t.Namespace, t.CredentialSecret, NormalizeRepoURL(t.RepoURL), NormalizeRef(t.Ref)}
		byRepo[k] = append(byRepo[k], t.Namespace+"/"+t.Name)
		targets[k] = t
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, pollWorkers)
	for k, keys := range byRepo {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			t := targets[k]
			var r headResult
			auth, err := h.auth(ctx, t)
			switch {
			case err != nil:
			case h.listRef != nil:
				r.sha, err = h.listRef(ctx, t)
			default:
				r.sha, err = h.resolveRef(ctx, t, auth)
			}
			r.err = err
			mu.Lock()
			defer mu.Unlock()
			for _, key := range keys {
				out[key] = r
			}
		})
	}
	wg.Wait()
	return out
}

// startTargetEvent takes the lease of an idle target (a concurrent event makes the update conflict and wins)
// and runs commit as a new event of kind: a poll or periodic reconcile, or the offboarding of a deleted target
// (offboard: no clone, an empty desired set, the pruner removes everything its inventory lists). head, when
// known, is recorded as the head the poll saw.
func (h *Handler) startTargetEvent(ctx context.Context, cm *corev1.ConfigMap, kind, commit, head string, offboard bool) error {
	t, err := TargetFromConfigMap(cm)
	if err != nil && !offboard {
		return err
	}
	if err := servedHere(cm, h.Lease.Platform); err != nil {
		return err
	}
	t.Offboard = t.Offboard || offboard
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
	pin(cm, h.Lease.Platform)
	if prev := cm.Annotations[pipeline.AnnotationEventID]; prev != "" && prev != eventID {
		cm.Annotations[pipeline.AnnotationPrevEvent] = prev
	}
	cm.Annotations[pipeline.AnnotationEventID] = eventID
	cm.Annotations[pipeline.AnnotationEventCommit] = commit
	cm.Annotations[pipeline.AnnotationReplayCount] = "0"
	if head != "" {
		cm.Annotations[AnnotationHeadSeen] = head
	}
	if r := cm.Annotations[AnnotationReconcileRequested]; r != "" {
		cm.Annotations[AnnotationReconcileHandled] = r
	}
	delete(cm.Annotations, pipeline.AnnotationResult)
	if err := h.Client.Update(ctx, cm); err != nil {
		if apierrors.IsConflict(err) {
			err = fmt.Errorf("the source target changed while taking the lease: %w", err)
		}
		stage.End(jspan, nil)
		stage.End(span, nil)
		return err
	}
	jspan.SetAttributes(attribute.String(AttrLeaseRef, pipeline.LeaseRef(leaseID)), attribute.String("commit", commit))
	h.inflight.Add(1)
	go func() {
		defer h.inflight.Done()
		h.runEvent(span, []*job{{target: t, commit: commit, ctx: jctx, span: jspan, leaseID: leaseID}}, nil)
	}()
	return nil
}
