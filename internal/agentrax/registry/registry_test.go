package registry

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"
)

// memPersister keeps the state in memory: the unit tests' stand-in for the ConfigMap, counting writes.
type memPersister struct {
	mu    sync.Mutex
	data  []byte
	saves int
	fail  error
}

func (m *memPersister) Load(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.data, nil
}

func (m *memPersister) Save(_ context.Context, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.data, m.saves = append([]byte(nil), data...), m.saves+1
	return nil
}

func (m *memPersister) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newTestRegistry() (*Registry, *clocktesting.FakeClock, *memPersister) {
	clk := clocktesting.NewFakeClock(t0)
	p := &memPersister{}
	r := New(Options{Clock: clk, Persister: p})
	r.SetLeader(true)
	return r, clk, p
}

func key(name string) Key { return Key{Namespace: "team-a", Name: name} }

func entry(name string, tools ...string) Entry {
	return Entry{Namespace: "team-a", Name: name, Endpoint: "http://" + name + ".team-a.svc:8080/mcp", Tools: tools}
}

func TestRegisterWritesOnlyOnChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, clk, p := newTestRegistry()

	created, err := r.Register(ctx, entry("planner", "b", "a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeTrue())
	g.Expect(p.count()).To(Equal(1))
	e, _ := r.Get(key("planner"))
	g.Expect(e.Tools).To(Equal([]string{"a", "b"}))
	g.Expect(e.TTL).To(Equal(int64(90)))
	g.Expect(e.RegisteredAt).To(Equal(t0))

	clk.Step(10 * time.Second)
	created, err = r.Register(ctx, entry("planner", "a", "b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(BeFalse())
	g.Expect(p.count()).To(Equal(1), "same content: no write")

	clk.Step(10 * time.Second)
	_, err = r.Register(ctx, entry("planner", "a", "b", "c"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.count()).To(Equal(2), "tools changed (e.g. after a canary promotion): one write")
	e, _ = r.Get(key("planner"))
	g.Expect(e.RegisteredAt).To(Equal(t0), "registeredAt kept across updates")
	g.Expect(e.HeartbeatAt).To(Equal(t0.Add(20 * time.Second)))

	for range 5 {
		clk.Step(20 * time.Second)
		res, _, err := r.Heartbeat(ctx, key("planner"), true)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(Healthy))
		_, err = r.Sweep(ctx)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(p.count()).To(Equal(2), "steady state: heartbeats and sweeps write nothing")
	g.Expect(r.Len()).To(Equal(1), "heartbeats keep it alive past its TTL")
}

func TestStrikesDeregisterBeforeExpiry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, clk, p := newTestRegistry()
	_, err := r.Register(ctx, entry("coder"))
	g.Expect(err).NotTo(HaveOccurred())

	interval := HealthInterval(DefaultTTL, time.Minute, 5*time.Second)
	var results []HeartbeatResult
	for range MaxStrikes {
		clk.Step(interval)
		removed, err := r.Sweep(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(removed).To(BeEmpty(), "the TTL does not expire it before the strikes do")
		res, _, err := r.Heartbeat(ctx, key("coder"), false)
		g.Expect(err).NotTo(HaveOccurred())
		results = append(results, res)
	}
	g.Expect(results).To(Equal([]HeartbeatResult{Strike, Strike, Deregistered}))
	g.Expect(r.Len()).To(BeZero())
	g.Expect(p.count()).To(Equal(2))

	res, _, err := r.Heartbeat(ctx, key("coder"), true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(Missing), "a later successful heartbeat asks the caller to re-register")
}

func TestSuccessResetsStrikes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, _, _ := newTestRegistry()
	_, _ = r.Register(ctx, entry("coder"))
	for _, ok := range []bool{false, false, true, false, false} {
		res, _, err := r.Heartbeat(ctx, key("coder"), ok)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).NotTo(Equal(Deregistered))
	}
	res, n, _ := r.Heartbeat(ctx, key("coder"), false)
	g.Expect(res).To(Equal(Deregistered))
	g.Expect(n).To(Equal(MaxStrikes))
}

// An agent whose AgentDeployment vanished without the finalizer running is never heartbeated again: the
// sweeper removes it within one TTL (plus one sweep period).
func TestSweepRemovesOrphansWithinOneTTL(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, clk, p := newTestRegistry()
	_, _ = r.Register(ctx, entry("orphan"))
	e := entry("short")
	e.TTL = 30
	_, _ = r.Register(ctx, e)

	clk.Step(30 * time.Second)
	removed, _ := r.Sweep(ctx)
	g.Expect(removed).To(BeEmpty(), "exactly at the TTL is not expired")
	clk.Step(time.Second)
	removed, _ = r.Sweep(ctx)
	g.Expect(removed).To(ConsistOf(key("short")))
	clk.Step(60 * time.Second)
	removed, _ = r.Sweep(ctx)
	g.Expect(removed).To(ConsistOf(key("orphan")))
	g.Expect(p.count()).To(Equal(4))
}

func TestRunSweeperUsesTheClock(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, clk, _ := newTestRegistry()
	_, _ = r.Register(ctx, entry("orphan"))
	done := make(chan struct{})
	go func() { r.RunSweeper(ctx, 0); close(done) }()
	g.Eventually(clk.HasWaiters).Should(BeTrue())
	for range 4 { // 120 s: past the 90 s TTL at a 30 s sweep
		clk.Step(SweepInterval)
	}
	g.Eventually(r.Len).Should(BeZero())
	cancel()
	g.Eventually(done).Should(BeClosed())
}

func TestColdStartGraceAndFollowers(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	old, clk, p := newTestRegistry()
	_, _ = old.Register(ctx, entry("a", "x"))
	_, _ = old.Register(ctx, entry("b"))
	clk.Step(10 * time.Minute) // the old leader died long ago; no heartbeat since

	leader := New(Options{Clock: clk, Persister: p})
	leader.SetLeader(true)
	g.Expect(leader.Load(ctx)).To(Succeed())
	g.Expect(leader.List()).To(Equal(old.List()))
	removed, err := leader.Sweep(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(removed).To(BeEmpty(), "loaded entries get one TTL of grace")
	g.Expect(p.count()).To(Equal(2), "loading writes nothing")

	follower := New(Options{Clock: clk})
	g.Expect(follower.Apply(p.data)).To(Succeed())
	g.Expect(follower.snapshot().agentsJSON).To(Equal(leader.snapshot().agentsJSON))
	_, err = follower.Register(ctx, entry("c"))
	g.Expect(err).To(MatchError(ErrNotLeader))
	removed, _ = follower.Sweep(ctx)
	g.Expect(removed).To(BeEmpty(), "followers never sweep (the upstream's followers purged everything)")

	clk.Step(DefaultTTL / 2)
	_, _, _ = leader.Heartbeat(ctx, key("a"), true)
	clk.Step(DefaultTTL/2 + time.Second)
	removed, _ = leader.Sweep(ctx)
	g.Expect(removed).To(ConsistOf(key("b")), "the one heartbeated survives, the other is swept")
	g.Expect(follower.Apply(p.data)).To(Succeed())
	g.Expect(follower.snapshot().agentsJSON).To(Equal(leader.snapshot().agentsJSON))
}

func TestFailedSaveIsRetriedBySweep(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	r, _, p := newTestRegistry()
	p.fail = errors.New("apiserver down")
	_, err := r.Register(ctx, entry("a"))
	g.Expect(err).To(MatchError(ContainSubstring("apiserver down")))
	g.Expect(r.Len()).To(Equal(1), "served from memory meanwhile")
	p.mu.Lock()
	p.fail = nil
	p.mu.Unlock()
	_, err = r.Sweep(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.count()).To(Equal(1))
	_, _ = r.Sweep(ctx)
	g.Expect(p.count()).To(Equal(1))
}
