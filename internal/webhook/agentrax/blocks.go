package agentrax

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
)

// Blocks: the write per admission, amortised.
//
// Each commit of a webhook process that saw creates also reserves a block of headroom in the same ledger write:
// an entry "~<holder>=agents:replicas/gpus@expiry" owned by this process (holder is random per process start).
// While the block is valid and no commit of the tenant is in flight, a create that fits in what is left of the
// block is admitted at once, without any API call, and recorded in memory; the drainer then writes it as a
// named reservation in the next commit, which also takes its share out of the block. The invariant still holds:
// every live admitted agent is covered by a named reservation or by its holder's block, and named reservations
// plus blocks never exceed the quota, since blocks are carved under the same compare-and-swap.
//
// A block is used only until blockUseMargin before it expires; every commit that admits a create renews it.
// Idle for blockIdle, the
// process releases it with one write. A process that dies leaves its block to expire: the TenantQuota
// controller drops blocks past expiry plus its settle grace, after adding reservations for live agents that
// have none (those a dead process admitted locally), so nothing admitted is uncovered in between.
const (
	blockTTL = 30 * time.Second
	// blockUseMargin: a locally admitted object is on its way to storage for at most the API server's request
	// timeout after the answer; the margin plus the controller's settle grace (30 s) covers it.
	blockUseMargin = 15 * time.Second
	blockIdle      = 2 * time.Second
	blockAgents    = 8 // agents a block is sized for
)

// localAdmit is a create admitted from this process's block and not yet written as a named reservation.
type localAdmit struct {
	name string
	d    quota.Demand
}

func newHolder() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (l *ledgers) blockName() string { return quota.BlockPrefix + l.holder }

// blockFree is what is left of block after used.
func blockFree(block *agentraxv1alpha1.Reservation, used quota.Usage) quota.Usage {
	return quota.Usage{Agents: block.Agents - used.Agents, Replicas: block.Replicas - used.Replicas, GPUs: block.GPUs - used.GPUs}
}

// tryLocal admits op from this process's block; false when it must go through a commit (a refusal is always
// decided by a commit). Called with l.mu held and, unless op is a dry run, no commit of the tenant in flight.
func (l *ledgers) tryLocal(t *tenantLedger, op quota.Op, now time.Time) bool {
	if l.noBlocks || op.Release || op.Old != nil || t.block == nil || t.base == nil || now.After(t.block.ReservedAt.Add(-blockUseMargin)) {
		return false
	}
	if i := quota.Find(t.baseLedger, l.blockName()); i < 0 || !t.baseLedger[i].ReservedAt.Equal(&t.block.ReservedAt) {
		// The newest ledger seen no longer holds the block as written (a hand edit, a rebuild): stop using it.
		t.block = nil
		return false
	}
	if quota.Find(t.baseLedger, op.Name) >= 0 {
		return false // a reservation under this name exists: the commit decides against it
	}
	if overQuota(t.base.Spec, quota.LedgerUsage(t.baseLedger, "")) {
		return false // the quota was lowered below what is reserved (blocks included): growth is refused by a commit
	}
	for _, a := range t.local {
		if a.name == op.Name {
			return false
		}
	}
	// The checks that do not depend on other agents (replicas per agent, one agent's own size).
	if d := quota.Admit(quota.Request{Spec: t.base.Spec, Name: op.Name, New: op.New, GPUResource: l.gpu}); len(d.Errors) > 0 {
		return false
	}
	free := blockFree(t.block, t.used)
	if free.Agents < 1 || free.Replicas < op.New.Replicas || free.GPUs < op.New.GPUs {
		return false
	}
	if !op.DryRun {
		t.used = t.used.Add(op.New)
		t.local = append(t.local, localAdmit{name: op.Name, d: op.New})
		t.lastActive = now
	}
	localAdmissions.Inc()
	return true
}

// foldLocal writes the local admissions into ledger as named reservations (never lowering one) and takes this
// process's block out of it, returning the block less what the local admissions took (nil when the ledger has
// none): the caller decides on the ledger without it, then puts a block back.
func (l *ledgers) foldLocal(ledger []agentraxv1alpha1.Reservation, local []localAdmit, now metav1.Time) ([]agentraxv1alpha1.Reservation, *agentraxv1alpha1.Reservation) {
	var taken quota.Usage
	for _, a := range local {
		r := agentraxv1alpha1.Reservation{Name: a.name, Replicas: a.d.Replicas, GPUs: a.d.GPUs, ReservedAt: now}
		if i := quota.Find(ledger, a.name); i >= 0 {
			r.Replicas, r.GPUs = max(r.Replicas, ledger[i].Replicas), max(r.GPUs, ledger[i].GPUs)
		}
		ledger = quota.Upsert(ledger, r)
		taken = taken.Add(a.d)
	}
	i := quota.Find(ledger, l.blockName())
	if i < 0 {
		return ledger, nil
	}
	rest := ledger[i]
	rest.Agents, rest.Replicas, rest.GPUs = max(rest.Agents-taken.Agents, 0), max(rest.Replicas-taken.Replicas, 0), max(rest.GPUs-taken.GPUs, 0)
	return quota.Remove(ledger, l.blockName()), &rest
}

// placeBlock puts this process's block back into ledger (decided without it): released, nothing; after
// creates, a new one sized by carveBlock; otherwise the previous one unchanged if it still fits (so a decision
// that changes nothing else writes nothing), else a new one.
func (l *ledgers) placeBlock(spec agentraxv1alpha1.TenantQuotaSpec, ledger []agentraxv1alpha1.Reservation, prev *agentraxv1alpha1.Reservation,
	release, creates bool, d quota.Demand, now time.Time) ([]agentraxv1alpha1.Reservation, *agentraxv1alpha1.Reservation) {
	switch {
	case release || l.noBlocks:
		return ledger, nil
	case creates:
		return l.carveBlock(spec, ledger, d, now)
	case prev == nil:
		return ledger, nil
	}
	used := quota.LedgerUsage(ledger, "")
	if used.Agents+prev.Agents <= spec.MaxAgents && used.Replicas+prev.Replicas <= spec.MaxTotalReplicas && used.GPUs+prev.GPUs <= spec.MaxGPUs {
		return quota.Upsert(ledger, *prev), prev
	}
	return l.carveBlock(spec, ledger, d, now)
}

// carveBlock adds a block for this process to ledger: room for blockAgents agents the size of d, only when that
// is at most half of the headroom left in every dimension (the other half stays for other replicas); nil
// otherwise.
func (l *ledgers) carveBlock(spec agentraxv1alpha1.TenantQuotaSpec, ledger []agentraxv1alpha1.Reservation, d quota.Demand, now time.Time) ([]agentraxv1alpha1.Reservation, *agentraxv1alpha1.Reservation) {
	used := quota.LedgerUsage(ledger, "")
	if overQuota(spec, used) {
		return ledger, nil
	}
	half := func(limit, used int64) int64 { return max(limit-used, 0) / 2 }
	b := agentraxv1alpha1.Reservation{
		Name:       l.blockName(),
		Agents:     int32(min(int64(blockAgents), half(int64(spec.MaxAgents), int64(used.Agents)))),
		Replicas:   int32(min(int64(blockAgents)*int64(max(d.Replicas, 1)), half(int64(spec.MaxTotalReplicas), int64(used.Replicas)))),
		GPUs:       min(int64(blockAgents)*d.GPUs, half(spec.MaxGPUs, used.GPUs)),
		ReservedAt: metav1.NewTime(now.Add(blockTTL).Truncate(time.Second)),
	}
	if b.Agents < blockAgents || b.Replicas < blockAgents*max(d.Replicas, 1) || b.GPUs < blockAgents*d.GPUs {
		// Near the limit every admission is decided by a commit, exactly: no headroom is parked where another
		// replica cannot use it.
		return ledger, nil
	}
	return quota.Upsert(ledger, b), &b
}

// overQuota tells usage above a ceiling (the quota was lowered): no block then, and nothing decided locally.
func overQuota(spec agentraxv1alpha1.TenantQuotaSpec, u quota.Usage) bool {
	return u.Agents > spec.MaxAgents || u.Replicas > spec.MaxTotalReplicas || u.GPUs > spec.MaxGPUs
}

// withoutBlocks is ledger less every block.
func withoutBlocks(ledger []agentraxv1alpha1.Reservation) []agentraxv1alpha1.Reservation {
	out := make([]agentraxv1alpha1.Reservation, 0, len(ledger))
	for _, r := range ledger {
		if !quota.IsBlock(r) {
			out = append(out, r)
		}
	}
	return out
}
