package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentraxv1alpha1 "github.com/quartet-dev/quartet-operator/apis/agentrax/v1alpha1"
	"github.com/quartet-dev/quartet-operator/internal/agentrax/registry"
)

// hangingListener accepts connections and never answers, as an agent behind a network policy that drops the
// operator's packets looks once the connection is made.
type hangingListener struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startHanging(t *testing.T) *hangingListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hangingListener{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			go func() {
				buf := make([]byte, 1<<16)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			_ = c.Close()
		}
	})
	return h
}

// With ProbeWorkers, Register never waits for an agent that does not answer: it returns at once, the probes of
// many such agents run at most ProbeWorkers at a time, each ends by ProbeTimeout and wakes the reconciler, whose
// next call reports the failed handshake — and does not probe again before the health interval.
func TestRegisterNeverWaitsForAHangingAgent(t *testing.T) {
	g := NewWithT(t)
	h := startHanging(t)
	reg := registry.New(registry.Options{})
	reg.SetLeader(true)
	woken := make(chan registry.Key, 16)
	adapter := &Adapter{Interval: time.Minute, ProbeWorkers: 2, ProbeTimeout: 300 * time.Millisecond,
		Prober: &registry.Prober{Registry: reg, Client: dialThrough(t, "*.svc:8080="+h.ln.Addr().String())}}
	adapter.SetWake(func(k registry.Key) { woken <- k })
	agent := func(i int) *agentraxv1alpha1.AgentDeployment {
		return &agentraxv1alpha1.AgentDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("dropped-%d", i)},
			Spec:       agentraxv1alpha1.AgentDeploymentSpec{Port: 8080, MCP: &agentraxv1alpha1.MCPSpec{Expose: true}},
			Status:     agentraxv1alpha1.AgentDeploymentStatus{StableVersion: "img:v1"},
		}
	}
	const agents = 6
	began := time.Now()
	for i := range agents {
		start := time.Now()
		ok, err := adapter.Register(context.Background(), agent(i))
		g.Expect(time.Since(start)).To(BeNumerically("<", 200*time.Millisecond), "the caller (a reconcile worker) never waits for the agent")
		g.Expect(ok).To(BeFalse())
		g.Expect(err).NotTo(HaveOccurred(), "no outcome yet")
	}
	seen := map[registry.Key]bool{}
	g.Eventually(func() int {
		for {
			select {
			case k := <-woken:
				seen[k] = true
			default:
				return len(seen)
			}
		}
	}).WithTimeout(5*time.Second).Should(Equal(agents), "every probe ended by its deadline and woke the reconciler")
	// Each probe hangs until its 300 ms deadline; two at a time, six take three rounds (all at once: one).
	g.Expect(time.Since(began)).To(BeNumerically(">=", 3*300*time.Millisecond), "at most ProbeWorkers probes at once")
	for i := range agents {
		start := time.Now()
		ok, err := adapter.Register(context.Background(), agent(i))
		g.Expect(time.Since(start)).To(BeNumerically("<", 200*time.Millisecond))
		g.Expect(ok).To(BeFalse())
		g.Expect(errors.Is(err, registry.ErrHandshake)).To(BeTrue(), "the failed handshake is reported: %v", err)
	}
	g.Consistently(woken, 500*time.Millisecond).ShouldNot(Receive(), "no new probe before the health interval")

	// Deregistration waits for nothing either: no probe runs, and a later one cannot bring the entry back.
	g.Expect(adapter.Deregister(context.Background(), agent(0))).To(Succeed())
}
