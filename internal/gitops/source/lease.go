package source

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/quartet-dev/quartet-operator/internal/gitops/pipeline"
)

// LeaseConfig tunes leases and replays.
type LeaseConfig struct {
	// StaleAfter is how long an unreleased lease counts as active (default 10m); a crashed processor's lease
	// expires after it.
	StaleAfter time.Duration
	// MaxReplays is how often one event may be replayed (default 3).
	MaxReplays int
	// Platform is the `<namespace>/<name>` of the Platform this source handler belongs to (--platform; empty
	// outside a Platform): its leases pin unpinned targets to it, and targets pinned to another Platform are
	// refused (pin.go).
	Platform string
}

func (l LeaseConfig) staleAfter() time.Duration {
	if l.StaleAfter == 0 {
		return 10 * time.Minute
	}
	return l.StaleAfter
}

func (l LeaseConfig) maxReplays() int {
	if l.MaxReplays == 0 {
		return 3
	}
	return l.MaxReplays
}

// Refusal is a replay the lease rules refuse; the RPC answers FailedPrecondition.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// Active reports whether a source target's lease is held and not stale at now.
func (l LeaseConfig) Active(cm *corev1.ConfigMap, now time.Time) bool {
	id := cm.Annotations[pipeline.AnnotationLeaseID]
	if id == "" {
		return false
	}
	started, err := time.Parse(time.RFC3339, cm.Annotations[pipeline.AnnotationLeaseStart])
	return err == nil && now.Sub(started) < l.staleAfter()
}

// setLease records the lease leaseID on cm: by its reference only (pipeline.LeaseRef). The source target sits in
// the tenant's namespace, readable by the tenant; the lease ID itself stays with the processor and its calls.
func setLease(cm *corev1.ConfigMap, leaseID string, now time.Time) {
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[pipeline.AnnotationLeaseID] = pipeline.LeaseRef(leaseID)
	cm.Annotations[pipeline.AnnotationLeaseStart] = now.UTC().Format(time.RFC3339)
	// Every target that deploys gets the prune finalizer with its lease, in the same fenced update (a
	// separate write would move the resourceVersion the record expects). A target never leased deployed
	// nothing. The API server refuses new finalizers on an object being deleted.
	if cm.DeletionTimestamp.IsZero() {
		controllerutil.AddFinalizer(cm, FinalizerPrune)
	}
}

// AcquireNew takes the lease for a new event (webhook or manual retrieve): always, whoever holds it, with the
// resourceVersion as precondition and a retry on conflict. It records the event ID and commit so a replay can
// deploy exactly this commit, and starts the event's replay count at 0. A target pinned to another Platform is
// refused with a *NotServed, checked on the object the update is fenced by: two Platforms taking an unpinned
// target at once conflict, and the loser's retry finds the winner's pin.
func (l LeaseConfig) AcquireNew(ctx context.Context, c client.Client, key types.NamespacedName, leaseID, eventID, commit string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return err
		}
		if err := servedHere(cm, l.Platform); err != nil {
			return err
		}
		setLease(cm, leaseID, time.Now())
		pin(cm, l.Platform)
		if prev := cm.Annotations[pipeline.AnnotationEventID]; prev != "" && prev != eventID {
			cm.Annotations[pipeline.AnnotationPrevEvent] = prev
		}
		cm.Annotations[pipeline.AnnotationEventID] = eventID
		cm.Annotations[pipeline.AnnotationEventCommit] = commit
		cm.Annotations[pipeline.AnnotationReplayCount] = "0"
		delete(cm.Annotations, pipeline.AnnotationResult)
		return c.Update(ctx, cm)
	})
}

// AcquireReplay takes the lease of cm for a replay of the event recorded on it, only when no lease is active, the
// event has replays left and cm is not pinned to another Platform (a *NotServed). A concurrent writer makes the
// update conflict and the replay is refused.
func (l LeaseConfig) AcquireReplay(ctx context.Context, c client.Client, cm *corev1.ConfigMap, leaseID string) error {
	now := time.Now()
	if err := servedHere(cm, l.Platform); err != nil {
		return err
	}
	if l.Active(cm, now) {
		return &Refusal{fmt.Sprintf("source target %s/%s: lease %s is active", cm.Namespace, cm.Name,
			cm.Annotations[pipeline.AnnotationLeaseID])}
	}
	n, _ := strconv.Atoi(cm.Annotations[pipeline.AnnotationReplayCount])
	if n+1 > l.maxReplays() {
		return &Refusal{fmt.Sprintf("source target %s/%s: event %s was replayed %d times already (limit %d)",
			cm.Namespace, cm.Name, cm.Annotations[pipeline.AnnotationEventID], n, l.maxReplays())}
	}
	cm = cm.DeepCopy()
	setLease(cm, leaseID, now)
	pin(cm, l.Platform)
	cm.Annotations[pipeline.AnnotationReplayCount] = strconv.Itoa(n + 1)
	delete(cm.Annotations, pipeline.AnnotationResult)
	if err := c.Update(ctx, cm); err != nil {
		if apierrors.IsConflict(err) {
			return &Refusal{fmt.Sprintf("source target %s/%s changed while taking the lease", cm.Namespace, cm.Name)}
		}
		return err
	}
	return nil
}

// Release clears the lease when leaseID still holds it and records the result and notes (annotations; an empty
// value removes the annotation); a lease taken over by a newer processor is left alone.
func Release(ctx context.Context, c client.Client, key types.NamespacedName, leaseID, result string,
	notes map[string]string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, key, cm); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cm.Annotations[pipeline.AnnotationLeaseID] != pipeline.LeaseRef(leaseID) {
			return nil
		}
		delete(cm.Annotations, pipeline.AnnotationLeaseID)
		delete(cm.Annotations, pipeline.AnnotationLeaseStart)
		cm.Annotations[pipeline.AnnotationResult] = result
		for k, v := range notes {
			if v == "" {
				delete(cm.Annotations, k)
			} else {
				cm.Annotations[k] = v
			}
		}
		return c.Update(ctx, cm)
	})
}

var errAbandoned = errors.New("abandoned: a newer processor holds the lease")
