package agentrax

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/quota"
)

// memStore keeps one TenantQuota with the API server's compare-and-swap rule: an update must carry the stored
// resourceVersion. The real API server is exercised by the envtest quota barrier; this store lets the queue's
// own logic be checked quickly and counts its calls.
type memStore struct {
	mu      sync.Mutex
	tq      *agentraxv1alpha1.TenantQuota
	rv      int
	latency time.Duration
	gets    atomic.Int64
	updates atomic.Int64
	// otherWriterEvery > 0 makes every n-th accepted update be followed at once by another writer's (the
	// TenantQuota controller's), which moves the resourceVersion again.
	otherWriterEvery int
	accepted         int
}

var quotasResource = schema.GroupResource{Group: "agentrax.io", Resource: "tenantquotas"}

func newMemStore(spec agentraxv1alpha1.TenantQuotaSpec) *memStore {
	return &memStore{rv: 1, tq: &agentraxv1alpha1.TenantQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "q", ResourceVersion: "1"}, Spec: spec,
		Status: agentraxv1alpha1.TenantQuotaStatus{Conditions: []metav1.Condition{{
			Type: agentraxv1alpha1.ConditionLedgerReady, Status: metav1.ConditionTrue, Reason: agentraxv1alpha1.ReasonLedgerSettled}}}}}
}

func (s *memStore) get(_ context.Context, key types.NamespacedName) (*agentraxv1alpha1.TenantQuota, error) {
	s.gets.Add(1)
	time.Sleep(s.latency) // simulated API latency, so that requests pile up behind a write
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tq == nil || key.Name != s.tq.Name {
		return nil, apierrors.NewNotFound(quotasResource, key.Name)
	}
	return s.tq.DeepCopy(), nil
}

// swap follows apiStore.swap: with a non-empty base ledger, the stored ledger (and UID and generation) must be
// unchanged; with an empty one, the resourceVersion.
func (s *memStore) swap(_ context.Context, base *agentraxv1alpha1.TenantQuota, ledger string) (*agentraxv1alpha1.TenantQuota, error) {
	s.updates.Add(1)
	time.Sleep(s.latency)
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.tq
	if cur.UID != base.UID || cur.Generation != base.Generation || cur.Status.Ledger != base.Status.Ledger ||
		(base.Status.Ledger == "" && cur.ResourceVersion != base.ResourceVersion) {
		return nil, apierrors.NewConflict(quotasResource, base.Name, fmt.Errorf("stale base (resourceVersion %s, stored %s)", base.ResourceVersion, cur.ResourceVersion))
	}
	s.rv++
	next := cur.DeepCopy()
	next.ResourceVersion = strconv.Itoa(s.rv)
	next.Status.Ledger = ledger
	s.tq = next
	if s.accepted++; s.otherWriterEvery > 0 && s.accepted%s.otherWriterEvery == 0 {
		s.foreignLedgerWrite()
	}
	return next.DeepCopy(), nil
}

// foreignLedgerWrite is another writer of the ledger (the TenantQuota controller settling it, another replica):
// same reservations, but the ledger string and the resourceVersion change. Callers hold s.mu.
func (s *memStore) foreignLedgerWrite() {
	s.rv++
	next := s.tq.DeepCopy()
	next.ResourceVersion = strconv.Itoa(s.rv)
	if ledger, err := quota.ParseLedger(next.Status.Ledger); err == nil && len(ledger) > 0 {
		ledger[0].ReservedAt = metav1.NewTime(ledger[0].ReservedAt.Add(time.Second)) // settled: a newer time
		next.Status.Ledger = quota.FormatLedger(ledger)
	}
	s.tq = next
}

// touch is another writer that leaves the ledger alone (the TenantQuota controller writing usage, a label
// edit): it only moves the resourceVersion.
func (s *memStore) touch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	s.tq.ResourceVersion = strconv.Itoa(s.rv)
}

func (s *memStore) ledger(t testing.TB) []agentraxv1alpha1.Reservation {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ledger, err := quota.ParseLedger(s.tq.Status.Ledger)
	if err != nil {
		t.Fatalf("the queue wrote a ledger it cannot read back: %v", err)
	}
	return ledger
}

var key = types.NamespacedName{Namespace: "t", Name: "q"}

func demand(replicas int32, perPod int64) quota.Demand {
	return quota.Demand{Replicas: replicas, GPUs: int64(replicas) * perPod, GPUsPerPod: perPod}
}

// TestLedgersNeverExceedTheQuota: two queues (two webhook replicas) sharing one store, plus a third writer
// moving the resourceVersion after every third accepted write, admit 300 concurrent creates; the admitted totals fit every ceiling, the stored
// ledger is exactly what was admitted, and group commit needed far fewer writes than requests.
func TestLedgersNeverExceedTheQuota(t *testing.T) {
	g := NewWithT(t)
	spec := agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 120, MaxGPUs: 150, MaxTotalReplicas: 260, MaxReplicasPerAgent: 4}
	store := newMemStore(spec)
	store.latency = 200 * time.Microsecond
	replicas := []*ledgers{newLedgers(store, quota.DefaultGPUResourceName), newLedgers(store, quota.DefaultGPUResourceName)}
	store.otherWriterEvery = 3
	rng := rand.New(rand.NewPCG(3, 4))
	const creates = 300
	ops := make([]quota.Op, creates)
	errs := make([]error, creates)
	for i := range ops {
		ops[i] = quota.Op{Name: fmt.Sprintf("a%03d", i), New: demand(int32(1+rng.IntN(4)), int64(rng.IntN(3)))}
	}
	var wg sync.WaitGroup
	for i := range ops {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			errs[i] = replicas[i%2].submit(ctx, key, ops[i])
		})
	}
	wg.Wait()

	var admitted quota.Usage
	for i, err := range errs {
		if err == nil {
			admitted = admitted.Add(ops[i].New)
			continue
		}
		// Forbidden, or 429 when a group lost its compare-and-swap maxCommitAttempts times to the other replica
		// and the third writer (the client retries).
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsTooManyRequests(err)).To(BeTrue(), "op %d: %v", i, err)
	}
	g.Expect(admitted.Agents).To(BeNumerically("<=", spec.MaxAgents))
	g.Expect(admitted.GPUs).To(BeNumerically("<=", spec.MaxGPUs))
	g.Expect(admitted.Replicas).To(BeNumerically("<=", spec.MaxTotalReplicas))
	g.Expect(admitted.Agents).To(BeNumerically("<", creates), "the run is near the limit")
	// Every admission is answered only after the write that records it was accepted: the stored ledger holds
	// exactly what was admitted as soon as the last answer is in.
	all := quota.LedgerUsage(store.ledger(t), "")
	g.Expect(all).To(Equal(admitted))
	g.Expect(all.Agents).To(BeNumerically("<=", spec.MaxAgents), "the stored reservations fit the quota")
	g.Expect(all.GPUs).To(BeNumerically("<=", spec.MaxGPUs))
	g.Expect(all.Replicas).To(BeNumerically("<=", spec.MaxTotalReplicas))
	t.Logf("%d creates: %d admitted with %d writes and %d reads", creates, admitted.Agents, store.updates.Load(), store.gets.Load())
	g.Expect(store.updates.Load()).To(BeNumerically("<", creates), "requests were committed in groups")
}

// TestLedgersSteadyPath: one process admitting one request at a time reads the quota once and then only writes,
// each write's answer being the base of the next decision. Writes by others that leave the ledger alone cost
// nothing; a foreign ledger write costs one lost write and one read, unless the informer delivered it first.
func TestLedgersSteadyPath(t *testing.T) {
	g := NewWithT(t)
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 100, MaxGPUs: 100, MaxTotalReplicas: 100, MaxReplicasPerAgent: 4})
	l := newLedgers(store, quota.DefaultGPUResourceName)
	ctx := context.Background()
	for i := range 20 {
		g.Expect(l.submit(ctx, key, quota.Op{Name: fmt.Sprintf("a%02d", i), New: demand(1, 1)})).To(Succeed())
	}
	g.Expect(store.gets.Load()).To(Equal(int64(1)))
	g.Expect(store.updates.Load()).To(Equal(int64(20)))

	// The TenantQuota controller wrote usage (the resourceVersion moved, the ledger did not): no lost write.
	store.touch()
	g.Expect(l.submit(ctx, key, quota.Op{Name: "after-usage", New: demand(1, 1)})).To(Succeed())
	g.Expect(store.gets.Load()).To(Equal(int64(1)))
	g.Expect(store.updates.Load()).To(Equal(int64(21)))

	// Another writer changed the ledger: one lost write, one read, then the write that counts.
	store.mu.Lock()
	store.foreignLedgerWrite()
	store.mu.Unlock()
	g.Expect(l.submit(ctx, key, quota.Op{Name: "late", New: demand(1, 1)})).To(Succeed())
	g.Expect(store.gets.Load()).To(Equal(int64(2)))
	g.Expect(store.updates.Load()).To(Equal(int64(23)))
	g.Expect(quota.LedgerUsage(store.ledger(t), "").Agents).To(Equal(int32(22)))

	// The informer delivered the other writer's object first: no lost write, no read.
	store.mu.Lock()
	store.foreignLedgerWrite()
	store.mu.Unlock()
	current, err := store.get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	l.observe(current)
	g.Expect(l.submit(ctx, key, quota.Op{Name: "observed", New: demand(1, 1)})).To(Succeed())
	g.Expect(store.gets.Load()).To(Equal(int64(3)), "the test's own read only")
	g.Expect(store.updates.Load()).To(Equal(int64(24)))

	// An older object delivered late does not replace the newer base.
	l.observe(current)
	g.Expect(l.submit(ctx, key, quota.Op{Name: "after-late-event", New: demand(1, 1)})).To(Succeed())
	g.Expect(store.gets.Load()).To(Equal(int64(3)))
	g.Expect(store.updates.Load()).To(Equal(int64(25)))
}

// TestLedgersEmptyLedgerUsesTheResourceVersion: a base with an empty ledger cannot be compared by value (absent
// and "" look alike), so any write since makes the swap lose and the decision is taken again on a fresh read.
func TestLedgersEmptyLedgerUsesTheResourceVersion(t *testing.T) {
	g := NewWithT(t)
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 1, MaxGPUs: 10, MaxTotalReplicas: 10, MaxReplicasPerAgent: 4})
	l := newLedgers(store, quota.DefaultGPUResourceName)
	ctx := context.Background()
	g.Expect(l.submit(ctx, key, quota.Op{Name: "a", New: demand(1, 0)})).To(Succeed())
	g.Expect(l.submit(ctx, key, quota.Op{Name: "a", Release: true})).To(Succeed())
	g.Expect(store.ledger(t)).To(BeEmpty())
	reads, writes := store.gets.Load(), store.updates.Load()
	store.touch()
	g.Expect(l.submit(ctx, key, quota.Op{Name: "b", New: demand(1, 0)})).To(Succeed())
	g.Expect(store.gets.Load()).To(Equal(reads+1), "the lost swap re-reads")
	g.Expect(store.updates.Load()).To(Equal(writes+2), "one lost swap, one that counts")
	g.Expect(store.ledger(t)).To(ConsistOf(HaveField("Name", "b")))
}

// TestLedgersDecisionsWithoutAWriteAreReadFresh: a dry run, a covered update and a refusal write nothing, so
// each is decided on a ledger read for it, never on the remembered one.
func TestLedgersDecisionsWithoutAWriteAreReadFresh(t *testing.T) {
	g := NewWithT(t)
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 2, MaxGPUs: 10, MaxTotalReplicas: 10, MaxReplicasPerAgent: 4})
	l := newLedgers(store, quota.DefaultGPUResourceName)
	ctx := context.Background()
	g.Expect(l.submit(ctx, key, quota.Op{Name: "a", New: demand(2, 1)})).To(Succeed())
	g.Expect(l.submit(ctx, key, quota.Op{Name: "b", New: demand(2, 1)})).To(Succeed())
	reads, writes := store.gets.Load(), store.updates.Load()

	err := l.submit(ctx, key, quota.Op{Name: "c", New: demand(1, 0), DryRun: true})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "maxAgents 2: %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`exceeds TenantQuota "q" maxAgents`))
	g.Expect(store.gets.Load()).To(Equal(reads + 1))

	// The other replica released b meanwhile: the remembered ledger is stale, the fresh read admits c.
	other := newLedgers(store, quota.DefaultGPUResourceName)
	g.Expect(other.submit(ctx, key, quota.Op{Name: "b", Release: true})).To(Succeed())
	g.Expect(l.submit(ctx, key, quota.Op{Name: "c", New: demand(1, 0), DryRun: true})).To(Succeed())
	old := demand(1, 1)
	g.Expect(l.submit(ctx, key, quota.Op{Name: "a", New: demand(2, 1), Old: &old})).To(Succeed(), "covered by a's reservation")
	g.Expect(store.updates.Load()).To(Equal(writes+1), "only the release wrote")
	g.Expect(quota.LedgerUsage(store.ledger(t), "")).To(Equal(quota.Usage{Agents: 1, Replicas: 2, GPUs: 2}))
}

func TestLedgersMissingQuota(t *testing.T) {
	g := NewWithT(t)
	l := newLedgers(newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 1}), quota.DefaultGPUResourceName)
	missing := types.NamespacedName{Namespace: "t", Name: "nope"}
	err := l.submit(context.Background(), missing, quota.Op{Name: "a", New: demand(1, 0)})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue())
	g.Expect(err.Error()).To(ContainSubstring("spec.tenantRef: Not found"))
	g.Expect(l.submit(context.Background(), missing, quota.Op{Name: "a", Release: true})).To(Succeed())
	g.Eventually(func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.tenants)
	}).Should(BeZero(), "a tenantRef naming no quota leaves no queue behind")
}

// TestLedgersUnreadableLedger: a ledger that passes the schema but not the parser (a hand edit reserving one name
// twice) refuses admission with an error naming the problem and writes nothing; once the ledger is readable again
// (the TenantQuota controller rebuilt it) admission resumes from a fresh read.
func TestLedgersUnreadableLedger(t *testing.T) {
	g := NewWithT(t)
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxGPUs: 10, MaxTotalReplicas: 10, MaxReplicasPerAgent: 4})
	store.tq.Status.Ledger = "a=1/0@1,a=2/0@1"
	l := newLedgers(store, quota.DefaultGPUResourceName)
	ctx := context.Background()
	err := l.submit(ctx, key, quota.Op{Name: "b", New: demand(1, 0)})
	g.Expect(apierrors.IsInternalError(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring(`"a" is reserved twice`))
	g.Expect(store.updates.Load()).To(BeZero())

	store.mu.Lock()
	store.tq.Status.Ledger = "a=2/0@1"
	store.mu.Unlock()
	store.touch()
	g.Expect(l.submit(ctx, key, quota.Op{Name: "b", New: demand(1, 0)})).To(Succeed())
	g.Expect(store.ledger(t)).To(HaveLen(2))
	stored, err := store.get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stored.Status.Ledger).To(MatchRegexp(`^a=2/0@1,b=1/0@[0-9]+$`))
}

// TestLedgersUnbuiltLedgerFailsClosed: a TenantQuota whose ledger the controller has not built (no LedgerReady
// condition: new, re-created, or written by an earlier version whose reservations lived elsewhere) cannot tell
// "no agents" from "not counted yet". Creates and dry runs are refused with 429 and a Retry-After, a release
// passes, nothing is written; once the controller has built the ledger (the condition appears), admission
// decides on it.
func TestLedgersUnbuiltLedgerFailsClosed(t *testing.T) {
	g := NewWithT(t)
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 2, MaxGPUs: 10, MaxTotalReplicas: 10, MaxReplicasPerAgent: 4})
	ready := store.tq.Status.Conditions
	store.tq.Status.Conditions = nil
	store.tq.Status.UsedAgents = 2 // the earlier version counted two agents; its reservations are gone
	l := newLedgers(store, quota.DefaultGPUResourceName)
	ctx := context.Background()
	for _, op := range []quota.Op{{Name: "c", New: demand(1, 0)}, {Name: "d", New: demand(1, 0), DryRun: true}} {
		err := l.submit(ctx, key, op)
		g.Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "%s: got %v", op.Name, err)
		g.Expect(err.Error()).To(And(ContainSubstring("TenantQuota t/q"), ContainSubstring("not built yet"),
			ContainSubstring("agentrax-tenantquota")))
		seconds, ok := apierrors.SuggestsClientDelay(err)
		g.Expect(ok).To(BeTrue())
		g.Expect(seconds).To(Equal(1))
	}
	g.Expect(l.submit(ctx, key, quota.Op{Name: "a", Release: true})).To(Succeed())
	g.Expect(store.updates.Load()).To(BeZero())

	// The controller builds the ledger from the two live agents.
	store.mu.Lock()
	store.tq.Status.Ledger = "a=1/0@1,b=1/0@1"
	store.tq.Status.Conditions = ready
	store.mu.Unlock()
	store.touch()
	err := l.submit(ctx, key, quota.Op{Name: "c", New: demand(1, 0)})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "maxAgents 2 is used up by a and b: %v", err)
	g.Expect(store.updates.Load()).To(BeZero())
}

// TestFailedTestTellsAPatchTheServerCouldNotApply: the API server's answer to a JSON patch whose "test" did not
// hold (422, generic message, empty details) is a lost compare-and-swap; a schema violation (422 naming the
// object, with causes) and other errors are not.
func TestFailedTestTellsAPatchTheServerCouldNotApply(t *testing.T) {
	g := NewWithT(t)
	notApplied := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 422,
		Reason: metav1.StatusReasonInvalid, Message: "the server rejected our request due to an error in our request",
		Details: &metav1.StatusDetails{}}}
	g.Expect(failedTest(notApplied)).To(BeTrue())
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "agentrax.io", Kind: "TenantQuota"}, "q",
		field.ErrorList{field.Invalid(field.NewPath("status", "ledger"), "x", "does not match")})
	g.Expect(failedTest(invalid)).To(BeFalse())
	g.Expect(failedTest(apierrors.NewConflict(quotasResource, "q", fmt.Errorf("rv")))).To(BeFalse())
	g.Expect(failedTest(nil)).To(BeFalse())
}

// TestLedgersOneWritePerCreate: the anchor is ResourceQuota admission, one consistent write per admitted
// create; sequential creates cost exactly that here too (no headroom is parked anywhere).
func TestLedgersOneWritePerCreate(t *testing.T) {
	g := NewWithT(t)
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 10, MaxGPUs: 100, MaxTotalReplicas: 100, MaxReplicasPerAgent: 4})
	l := newLedgers(store, quota.DefaultGPUResourceName)
	for i := range 5 {
		g.Expect(l.submit(context.Background(), key, quota.Op{Name: fmt.Sprintf("a%d", i), New: demand(1, 1)})).To(Succeed())
	}
	g.Expect(store.ledger(t)).To(HaveLen(5), "five reservations")
	g.Expect(store.updates.Load()).To(Equal(int64(5)))
}

// TestLedgersLoweredQuota: once the quota is lowered below what is reserved, a create is refused against the
// newer spec the informer delivered.
func TestLedgersLoweredQuota(t *testing.T) {
	g := NewWithT(t)
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 100, MaxGPUs: 100, MaxTotalReplicas: 100, MaxReplicasPerAgent: 4})
	l := newLedgers(store, quota.DefaultGPUResourceName)
	ctx := context.Background()
	g.Expect(l.submit(ctx, key, quota.Op{Name: "a0", New: demand(1, 0)})).To(Succeed())
	g.Eventually(func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.tenants[key].running
	}).Should(BeTrue())

	store.mu.Lock()
	store.tq.Spec.MaxAgents = 1
	store.tq.Generation++
	store.mu.Unlock()
	store.touch()
	lowered, err := store.get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	l.observe(lowered)
	err = l.submit(ctx, key, quota.Op{Name: "a1", New: demand(1, 0)})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "maxAgents 1 is used by a0: %v", err)
	g.Expect(store.ledger(t)).To(ConsistOf(HaveField("Name", "a0")))
}

// settleFrom is the TenantQuota controller's write: it decided on base (read earlier) and writes ledger only if
// the TenantQuota's resourceVersion is still base's (its status patch carries that precondition).
func (s *memStore) settleFrom(base *agentraxv1alpha1.TenantQuota, ledger []agentraxv1alpha1.Reservation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tq.ResourceVersion != base.ResourceVersion {
		return apierrors.NewConflict(quotasResource, base.Name, fmt.Errorf("stale base"))
	}
	s.rv++
	next := s.tq.DeepCopy()
	next.ResourceVersion = strconv.Itoa(s.rv)
	next.Status.Ledger = quota.FormatLedger(ledger)
	s.tq = next
	return nil
}

// The race of a growing update against the settling of a stale reservation, interleaved exactly: agent a shrank
// from 10 to 5 replicas but still holds 10; the TenantQuota controller reads the quota and a's stored spec (5)
// and decides to lower the reservation to 5; meanwhile a grows back to 8, which the stale 10 covers; then the
// controller writes. If the update wrote nothing, the controller's write lands, a holds 5 while it may run 8,
// and a new agent b of 7 fits a quota of 12 that a and b overrun (15). A growing update writes the ledger, so
// the controller's write conflicts and it settles again from what is stored now.
func TestGrowingUpdateCoveredByAStaleReservationIsABarrier(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := newMemStore(agentraxv1alpha1.TenantQuotaSpec{MaxAgents: 5, MaxGPUs: 0, MaxTotalReplicas: 12, MaxReplicasPerAgent: 10})
	stale := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	store.tq.Status.Ledger = quota.FormatLedger([]agentraxv1alpha1.Reservation{{Name: "a", Replicas: 10, ReservedAt: stale}})
	l := newLedgers(store, quota.DefaultGPUResourceName)

	controllerRead, err := store.get(ctx, key)
	g.Expect(err).NotTo(HaveOccurred())
	lowered := []agentraxv1alpha1.Reservation{{Name: "a", Replicas: 5, ReservedAt: stale}}

	old := demand(5, 0)
	g.Expect(l.submit(ctx, key, quota.Op{Name: "a", New: demand(8, 0), Old: &old})).To(Succeed(), "covered by the reservation")

	if err := store.settleFrom(controllerRead, lowered); err == nil {
		// The controller's stale write landed: what a new agent is admitted against is now wrong.
		createErr := l.submit(ctx, key, quota.Op{Name: "b", New: demand(7, 0)})
		g.Expect(createErr).To(HaveOccurred(), "agent b admitted while a (8 replicas) holds only 5: %v", store.ledger(t))
		return
	}
	// The controller settles again from the stored ledger: a's reservation was just refreshed, so it waits out
	// the grace period, by when a's stored spec (8) is what it reads.
	g.Expect(store.ledger(t)).To(ContainElement(And(HaveField("Name", "a"), HaveField("Replicas", int32(10)))))
	createErr := l.submit(ctx, key, quota.Op{Name: "b", New: demand(7, 0)})
	g.Expect(apierrors.IsForbidden(createErr)).To(BeTrue(), "b does not fit next to a's reservation: %v", createErr)
}
