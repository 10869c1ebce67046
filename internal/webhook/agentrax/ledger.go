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

// flushRetryDelay spaces the retries of a failed write of local admissions.
const flushRetryDelay = 200 * time.Millisecond

// defaultCommitTimeout bounds a group whose requests carry no deadline (the webhook's own is 10 s).
const defaultCommitTimeout = 10 * time.Second

// ledgers queues the admissions of each tenant and commits them in groups. A tenant's queue is drained by one
// goroutine at a time, so one process never races itself for a ledger's resourceVersion; requests that arrive
// while a write is in flight are decided together and committed by the next single write.
type ledgers struct {
	store ledgerStore
	gpu   corev1.ResourceName
	// holder names this process's blocks (blocks.go).
	holder string
	// now is the clock of block expiry and idleness (tests move it).
	now func() time.Time
	// noBlocks turns blocks off: every admission is decided by a commit (tests of the commit path).
	noBlocks bool

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
	// block is this process's block as its last successful commit wrote it; used is what local admissions took
	// from it since, local those admissions (blocks.go).
	block *agentraxv1alpha1.Reservation
	used  quota.Usage
	local []localAdmit
	// lastDemand sizes the next block; lastActive is when the tenant last admitted a create here.
	lastDemand quota.Demand
	lastActive time.Time
	// release asks the drainer to give the block back (idle).
	release bool
	// epoch counts forget calls, so that a commit in flight when the quota was deleted restores nothing.
	epoch int
	idle  *time.Timer
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
	return &ledgers{store: store, gpu: gpu, holder: newHolder(), now: time.Now, tenants: map[types.NamespacedName]*tenantLedger{}}
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
	if !op.Release && op.Old == nil {
		t.lastDemand = op.New
	}
	// A dry run changes nothing, so it may be decided from the block even while a commit is in flight; a
	// create may not (the commit re-sizes the block without knowing it).
	if !t.running || op.DryRun {
		if l.tryLocal(t, op, l.now()) {
			if !op.DryRun {
				// Write it as a named reservation right away; the answer does not wait for that write.
				t.running = true
				go l.drain(key, t)
			}
			l.mu.Unlock()
			return nil
		}
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
		group, base, local, release := t.pending, t.base, t.local, t.release
		t.pending, t.release = nil, false
		if len(group) == 0 && len(local) == 0 && !release {
			t.running = false
			if t.base == nil && t.block == nil {
				// No TenantQuota behind this key (never found, or deleted): nothing worth keeping, and tenantRefs
				// naming no quota must not grow the map.
				delete(l.tenants, key)
			} else if t.block != nil {
				l.armIdle(key, t)
			}
			l.mu.Unlock()
			return
		}
		demand, epoch := t.lastDemand, t.epoch
		l.mu.Unlock()
		c := l.commit(key, base, group, local, release, demand)
		l.mu.Lock()
		switch {
		case c.gone || t.epoch != epoch:
			// The quota is gone (or was deleted while the commit ran): nothing to record, nothing to admit from.
			c = commitResult{}
			t.local, t.used, t.block = nil, quota.Usage{}, nil // no quota left to record them in
		case !c.written && len(local) > 0:
			// The local admissions are still to be written; do not spin on a failing API server.
			l.mu.Unlock()
			time.Sleep(flushRetryDelay)
			l.mu.Lock()
		}
		if c.written {
			// No local admission happens while the drainer runs, so t.local is still exactly local.
			if c.block != nil && (t.block == nil || !c.block.ReservedAt.Equal(&t.block.ReservedAt)) {
				t.lastActive = l.now() // a new or renewed block: idle counts from here
			}
			t.local, t.used, t.block = nil, quota.Usage{}, c.block
		} else if c.base == nil {
			t.block = nil // unknown whether it was written: no local admissions until a commit succeeds
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
		t.block, t.local, t.used = nil, nil, quota.Usage{}
		t.epoch++
		if t.idle != nil {
			t.idle.Stop()
			t.idle = nil
		}
		if !t.running {
			delete(l.tenants, key)
		}
	}
}

// armIdle gives the block back once the tenant has admitted nothing here for blockIdle. Called with l.mu held.
// The timer is armed once and re-arms itself while admissions continue, so that commits (which end a drain and
// call this) do not keep pushing the release back.
func (l *ledgers) armIdle(key types.NamespacedName, t *tenantLedger) {
	if t.idle != nil {
		return
	}
	var fire func()
	fire = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.tenants[key] != t || t.block == nil {
			t.idle = nil
			return
		}
		if wait := blockIdle - l.now().Sub(t.lastActive); wait > 0 || t.running {
			t.idle = time.AfterFunc(max(wait, blockIdle/4), fire)
			return
		}
		t.idle = nil
		t.release, t.running = true, true
		go l.drain(key, t)
	}
	t.idle = time.AfterFunc(blockIdle, fire)
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

// commitResult is what a commit leaves: the base of the next one (nil: read it first), this process's block as
// written, and whether the write (and so the local admissions folded into it) was accepted.
type commitResult struct {
	base    *agentraxv1alpha1.TenantQuota
	block   *agentraxv1alpha1.Reservation
	written bool
	// gone: the TenantQuota does not exist (any more).
	gone bool
}

// commit decides group on the ledger, folds in the local admissions, puts this process's block back (placeBlock), and
// writes the outcome once; a lost compare-and-swap (or deciding on a base that nothing will write) re-reads and
// decides everything again. It answers every op.
func (l *ledgers) commit(key types.NamespacedName, base *agentraxv1alpha1.TenantQuota, group []*pendingOp, local []localAdmit,
	release bool, demand quota.Demand) commitResult {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout(group))
	defer cancel()
	for attempt := 0; ; attempt++ {
		group = live(group)
		if len(group) == 0 && len(local) == 0 && !release {
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
		folded, prev := l.foldLocal(ledger, local, metav1.NewTime(now.Truncate(time.Second)))
		b := quota.DecideBatch(fmt.Sprintf("%q", key.Name), base.Spec, folded, ops, l.gpu, metav1.NewTime(now.Truncate(time.Second)))
		heldElsewhere(b, base.Spec, ops, l.gpu, key)
		next, block := l.placeBlock(base.Spec, b.Ledger, prev, release, len(local) > 0 || admittedCreate(ops, b), demand, now)
		formatted := quota.FormatLedger(next)
		if formatted == base.Status.Ledger {
			if !fresh {
				// Nothing to write would confirm the base is current: read it and decide again.
				base = nil
				continue
			}
			ledgerGroupSize.Observe(float64(len(group)))
			answer(group, b)
			return commitResult{base: base, block: block, written: true}
		}
		stored, err := l.store.swap(ctx, base, formatted)
		switch {
		case err == nil:
			ledgerCalls.WithLabelValues("write").Inc()
			ledgerGroupSize.Observe(float64(len(group)))
			answer(group, b)
			return commitResult{base: stored, block: block, written: true}
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			ledgerCalls.WithLabelValues("conflict").Inc()
			base = nil
		default:
			answerAll(group, err)
			return commitResult{}
		}
	}
}

// admittedCreate tells whether the batch admitted a create that is not a dry run: activity worth a block.
func admittedCreate(ops []quota.Op, b quota.Batch) bool {
	for i, op := range ops {
		if !op.Release && op.Old == nil && !op.DryRun && len(b.Errors[i]) == 0 && b.Held[i] == nil {
			return true
		}
	}
	return false
}

// heldElsewhere turns a refusal that only other processes' blocks cause into a retry: those blocks are given
// back when their holder is idle (blockIdle) or expire.
func heldElsewhere(b quota.Batch, spec agentraxv1alpha1.TenantQuotaSpec, ops []quota.Op, gpu corev1.ResourceName, key types.NamespacedName) {
	named := withoutBlocks(b.Ledger)
	if len(named) == len(b.Ledger) {
		return
	}
	for i, op := range ops {
		if len(b.Errors[i]) == 0 {
			continue
		}
		d := quota.Admit(quota.Request{Spec: spec, Ledger: named, Name: op.Name, New: op.New, Old: op.Old, GPUResource: gpu})
		if len(d.Errors) == 0 {
			b.Errors[i] = nil
			b.Held[i] = apierrors.NewTooManyRequests(fmt.Sprintf("TenantQuota %s: the room this AgentDeployment needs is "+
				"reserved by another webhook replica for its own admissions; it is given back when that replica is idle "+
				"for 2 s, or a minute after it stopped, retry", key), 1)
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
		if b.Held[i] != nil {
			p.done <- b.Held[i]
			continue
		}
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
	if len(group) == 0 {
		return defaultCommitTimeout // a flush of local admissions or a block release: no request waits
	}
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
