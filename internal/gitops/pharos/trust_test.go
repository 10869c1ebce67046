package pharos

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// countingListener accepts TCP connections on loopback and only counts them: an address no Platform deploys,
// where a span claims a source handler runs.
func countingListener(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	var accepted atomic.Int32
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = lis.Close() })
	return lis.Addr().String(), &accepted
}

// TestUnknownSourceHandlerIsNeverDialed: a failed event whose spans name a source handler address outside the
// Platform's set is refused (gave-up with the address in the reason, counted as an untrusted replay) and pharos
// never opens a connection to that address; the Platform's own source handler is not asked either.
func TestUnknownSourceHandlerIsNeverDialed(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	foreign, accepted := countingListener(t)
	o := testOptions(src.addr)
	p, _ := startPharos(t, o)
	before := testutil.ToFloat64(replays.WithLabelValues("untrusted", ""))

	id := failingEvent(tracerTo(t, grpcExporter(t, p), foreign))
	// Long enough for several replay attempts with the test's backoff.
	g.Consistently(accepted.Load, 10*o.BackoffBase).Should(BeZero(), "pharos connected to %s", foreign)
	g.Eventually(func(g Gomega) {
		e := eventOf(g, p, id)
		g.Expect(e.State).To(Equal(GaveUp))
		g.Expect(e.Reason).To(ContainSubstring(foreign))
		g.Expect(e.Reason).To(ContainSubstring("not one of the Platform's source handlers"))
	}).Should(Succeed())
	g.Expect(testutil.ToFloat64(replays.WithLabelValues("untrusted", "")) - before).To(Equal(1.0))
	g.Expect(accepted.Load()).To(BeZero(), "pharos connected to %s", foreign)
	g.Expect(src.Calls()).To(BeEmpty())
	g.Expect(eventOf(g, p, id).Replays).To(BeZero())
}

// TestKnownSourceHandlerIsDialed: the same failure naming the Platform's source handler is replayed (the check
// does not refuse the addresses it was given).
func TestKnownSourceHandlerIsDialed(t *testing.T) {
	g := NewWithT(t)
	src := startFakeSource(t)
	o := testOptions("other.example:50051", src.addr)
	p, _ := startPharos(t, o)
	tr := tracerTo(t, grpcExporter(t, p), src.addr)
	src.setTracer(tr)
	id := failingEvent(tr)
	g.Eventually(src.Calls).WithTimeout(10 * time.Second).Should(Equal([]string{id}))
}
