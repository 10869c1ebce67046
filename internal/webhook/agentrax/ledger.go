package agentrax

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
)

// ledgerStore is where the ledgers live: the API server in production (apiStore).
type ledgerStore interface {
	// get reads a TenantQuota as stored now.
	get(ctx context.Context, key types.NamespacedName) (*agentraxv1alpha1.TenantQuota, error)
	// swap stores ledger as the status.ledger of base's TenantQuota if what admission decided on is unchanged:
	// the same object (UID), spec (generation) and ledger; a conflict error otherwise. Writes that change
	// nothing of that (usage counters, conditions, labels) do not make it fail. It returns the stored object.
	swap(ctx context.Context, base *agentraxv1alpha1.TenantQuota, ledger string) (*agentraxv1alpha1.TenantQuota, error)
}

// maxCommitAttempts bounds the read-decide-write rounds of one group; only writers outside this process (other
// webhook replicas, the TenantQuota controller) make a round fail.
const maxCommitAttempts = 100

// defaultCommitTimeout bounds a group whose requests carry no deadline (the webhook's own is 10 s).
const defaultCommitTimeout = 10 * time.Second

// ledgers queues the admissions of each tenant and commits them in groups. A tenant's queue is drained by one
// goroutine at a time, so one process never races itself for a ledger's resourceVersion; requests that arrive
// while a write is in flight are decided together and committed by the next single write.
type ledgers struct {
	store ledgerStore
	gpu   corev1.ResourceName
	// now stamps reservations (tests move it).
	now func() time.Time

	mu      sync.Mutex
	tenants map[types.NamespacedName]*tenantLedger
}

// tenantLedger is one TenantQuota's queue. Its fields are guarded by ledgers.mu.
type tenantLedger struct {
	pending []*pendingOp
	running bool
	// base is the TenantQuota as this process last wrote or read it; nil means read it before deciding. It may
	// be stale: decisions made on it count only once the API server accepts a write based on it.
	base *agentraxv1alpha1.TenantQuota
	// baseLedger is base's ledger, parsed (nil when unreadable).
	baseLedger []agentraxv1alpha1.Reservation
	// epoch counts forget calls, so that a commit in flight when the quota was deleted restores nothing.
	epoch int
}

// setBase remembers tq as the base and parses its ledger.
func (t *tenantLedger) setBase(tq *agentraxv1alpha1.TenantQuota) {
	t.base, t.baseLedger = tq, nil
	if tq != nil {
		t.baseLedger, _ = quota.ParseLedger(tq.Status.Ledger)
	}
}

type pendingOp struct {
	ctx  context.Context
	op   quota.Op
	done chan error
}

func newLedgers(store ledgerStore, gpu corev1.ResourceName) *ledgers {
	return &ledgers{store: store, gpu: gpu, now: time.Now, tenants: map[types.NamespacedName]*tenantLedger{}}
}

// submit queues op for the TenantQuota key and waits until it is decided (and, unless a dry run or refused,
// recorded) or ctx ends.
func (l *ledgers) submit(ctx context.Context, key types.NamespacedName, op quota.Op) error {
	p := &pendingOp{ctx: ctx, op: op, done: make(chan error, 1)}
	l.mu.Lock()
	t := l.tenants[key]
	if t == nil {
		t = &tenantLedger{}
		l.tenants[key] = t
	}
	t.pending = append(t.pending, p)
	if !t.running {
		t.running = true
		go l.drain(key, t)
	}
	l.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		// The op may still be committed: the ledger then over-reserves until the TenantQuota controller settles it.
		return ctx.Err()
	}
}

// drain commits the tenant's queue group by group until it is empty.
func (l *ledgers) drain(key types.NamespacedName, t *tenantLedger) {
	for {
		l.mu.Lock()
		group, base := t.pending, t.base
		t.pending = nil
		if len(group) == 0 {
			t.running = false
			if t.base == nil {
				// No TenantQuota behind this key (never found, or deleted): nothing worth keeping, and tenantRefs
				// naming no quota must not grow the map.
				delete(l.tenants, key)
			}
			l.mu.Unlock()
			return
		}
		epoch := t.epoch
		l.mu.Unlock()
		c := l.commit(key, base, group)
		l.mu.Lock()
		if c.gone || t.epoch != epoch {
			// The quota is gone (or was deleted while the commit ran): nothing to remember.
			c = commitResult{}
		}
		if t.base == base {
			t.setBase(c.base)
		} else {
			// observe delivered a newer object while the group was being committed.
			t.setBase(fresher(c.base, t.base))
		}
		l.mu.Unlock()
	}
}

// observe offers a TenantQuota as the manager's informer saw it (another replica's or the TenantQuota
// controller's write) as the base of the next group of its queue, so that the next write does not first lose
// a compare-and-swap against it. Only queues that exist are updated; the object is never modified.
func (l *ledgers) observe(tq *agentraxv1alpha1.TenantQuota) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.tenants[types.NamespacedName{Namespace: tq.Namespace, Name: tq.Name}]; t != nil {
		if t.base != nil && t.base.UID == tq.UID && t.base.ResourceVersion == tq.ResourceVersion {
			return // this process's own write coming back through the informer: already the base
		}
		if next := fresher(t.base, tq); next != t.base {
			t.setBase(next)
		}
	}
}

// forget drops the remembered base of a deleted TenantQuota.
func (l *ledgers) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.tenants[key]; t != nil {
		t.setBase(nil)
		t.epoch++
		if !t.running {
			delete(l.tenants, key)
		}
	}
}

// fresher returns whichever of a and b is probably the newer state. resourceVersions are opaque, but etcd's are
// increasing integers; this choice is only a guess that saves a lost write, never a correctness matter: every
// write is still checked by the API server. Unparsable versions prefer b.
func fresher(a, b *agentraxv1alpha1.TenantQuota) *agentraxv1alpha1.TenantQuota {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	if a.UID != b.UID {
		return b
	}
	ra, errA := strconv.ParseUint(a.ResourceVersion, 10, 64)
	rb, errB := strconv.ParseUint(b.ResourceVersion, 10, 64)
	if errA == nil && errB == nil && ra > rb {
		return a
	}
	return b
}

// commitResult is what a commit leaves: the base of the next one (nil: read it first).
type commitResult struct {
	base *agentraxv1alpha1.TenantQuota
	// gone: the TenantQuota does not exist (any more).
	gone bool
}

// commit decides group on the ledger and writes the outcome once; a lost compare-and-swap (or deciding on a
// base that nothing will write) re-reads and decides everything again. It answers every op.
func (l *ledgers) commit(key types.NamespacedName, base *agentraxv1alpha1.TenantQuota, group []*pendingOp) commitResult {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout(group))
	defer cancel()
	for attempt := 0; ; attempt++ {
		group = live(group)
		if len(group) == 0 {
			return commitResult{base: base}
		}
		if attempt >= maxCommitAttempts {
			answerAll(group, apierrors.NewTooManyRequests("too much contention on the TenantQuota reservation ledger; retry", 1))
			return commitResult{}
		}
		if attempt > 1 {
			// Two lost rounds in a row: another replica is writing too; step aside for a moment.
			if err := sleep(ctx, time.Duration(rand.Int64N(int64(time.Millisecond)<<min(attempt, 6)))); err != nil {
				answerAll(group, err)
				return commitResult{}
			}
		}
		fresh := base == nil
		if fresh {
			ledgerCalls.WithLabelValues("read").Inc()
			tq, err := l.store.get(ctx, key)
			if apierrors.IsNotFound(err) {
				for _, p := range group {
					if p.op.Release {
						p.done <- nil
					} else {
						p.done <- quotaNotFound(p.op.Name, key)
					}
				}
				return commitResult{gone: true}
			}
			if err != nil {
				answerAll(group, err)
				return commitResult{}
			}
			base = tq
		}
		if !meta.IsStatusConditionTrue(base.Status.Conditions, agentraxv1alpha1.ConditionLedgerReady) {
			if !fresh {
				base = nil // the controller may have built it since: look once more
				continue
			}
			answerUnbuilt(group, key)
			return commitResult{base: base}
		}
		ledger, err := quota.ParseLedger(base.Status.Ledger)
		if err != nil {
			// The schema keeps malformed ledgers out; a duplicate name or an overflowing number passes it. Refuse
			// rather than guess: the TenantQuota controller rebuilds the ledger from the live agents.
			answerAll(group, apierrors.NewInternalError(fmt.Errorf("TenantQuota %s: %w; retry once the TenantQuota controller has rebuilt it", key, err)))
			return commitResult{}
		}
		now := l.now()
		ops := make([]quota.Op, len(group))
		for i, p := range group {
			ops[i] = p.op
		}
		b := quota.DecideBatch(fmt.Sprintf("%q", key.Name), base.Spec, ledger, ops, l.gpu, metav1.NewTime(now.Truncate(time.Second)))
		formatted := quota.FormatLedger(b.Ledger)
		if formatted == base.Status.Ledger {
			if !fresh {
				// Nothing to write would confirm the base is current: read it and decide again.
				base = nil
				continue
			}
			ledgerGroupSize.Observe(float64(len(group)))
			answer(group, b)
			return commitResult{base: base}
		}
		stored, err := l.store.swap(ctx, base, formatted)
		switch {
		case err == nil:
			ledgerCalls.WithLabelValues("write").Inc()
			ledgerGroupSize.Observe(float64(len(group)))
			answer(group, b)
			return commitResult{base: stored}
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			ledgerCalls.WithLabelValues("conflict").Inc()
			base = nil
		default:
			answerAll(group, err)
			return commitResult{}
		}
	}
}

// live answers the ops whose request already ended and returns the others.
func live(group []*pendingOp) []*pendingOp {
	out := group[:0:0]
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.done <- err
			continue
		}
		out = append(out, p)
	}
	return out
}

func answer(group []*pendingOp, b quota.Batch) {
	for i, p := range group {
		if len(b.Errors[i]) > 0 {
			p.done <- refusal(p.op.Name, b.Errors[i])
		} else {
			p.done <- nil
		}
	}
}

// answerUnbuilt answers a group decided against a ledger the TenantQuota controller has not built yet: releases
// pass (the controller drops what is left when it builds the ledger), everything else is refused with a retry,
// since an empty unbuilt ledger would admit agents the live ones already use up.
func answerUnbuilt(group []*pendingOp, key types.NamespacedName) {
	for _, p := range group {
		if p.op.Release {
			p.done <- nil
			continue
		}
		p.done <- apierrors.NewTooManyRequests(fmt.Sprintf("TenantQuota %s: its admission ledger is not built yet "+
			"(a new or re-created quota, or one written by an earlier operator version); the agentrax-tenantquota "+
			"controller builds it from the live AgentDeployments, retry in a moment", key), 1)
	}
}

func answerAll(group []*pendingOp, err error) {
	for _, p := range group {
		p.done <- err
	}
}

// commitTimeout is the longest time any request of the group still waits for its answer.
func commitTimeout(group []*pendingOp) time.Duration {
	var longest time.Duration
	for _, p := range group {
		d := defaultCommitTimeout
		if deadline, ok := p.ctx.Deadline(); ok {
			d = time.Until(deadline)
		}
		longest = max(longest, d)
	}
	return longest
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
